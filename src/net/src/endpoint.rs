//! Typed RPC endpoints: a message type, the handler that serves it on this
//! node, and the client side that calls it on others.

use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use tracing::Instrument;

use crate::body::ByteStream;
use crate::error::NetError;
use crate::frame::Priority;
use crate::ident::NodeId;
use crate::netapp::NetApp;

/// A request type of an endpoint, and the type of its answer. Both travel
/// as MessagePack maps with field names (`rmp_serde::to_vec_named`), so a
/// later version can add fields with `#[serde(default)]` and still talk to
/// this one.
pub trait Message: serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static {
    type Response: serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static;
}

/// Serves the messages of one endpoint on this node.
///
/// A handler runs to completion even if the caller gives up (timeout,
/// dropped future, closed connection); its answer is then discarded. This
/// keeps a handler's side effects independent of how impatient the caller
/// was.
#[async_trait::async_trait]
pub trait EndpointHandler<M: Message>: Send + Sync + 'static {
    async fn handle(&self, msg: M, from: NodeId) -> M::Response;

    /// The variant with bodies. The default ignores the request body (which
    /// cancels it) and sends no response body.
    async fn handle_streaming(
        &self,
        msg: M,
        body: Option<ByteStream>,
        from: NodeId,
    ) -> (M::Response, Option<ByteStream>) {
        drop(body);
        (self.handle(msg, from).await, None)
    }
}

/// What the connection layer sees of an endpoint: bytes in, bytes out.
#[async_trait::async_trait]
pub(crate) trait ErasedHandler: Send + Sync {
    async fn handle_raw(
        &self,
        msg: Bytes,
        body: Option<ByteStream>,
        from: NodeId,
    ) -> Result<(Vec<u8>, Option<ByteStream>), String>;
}

pub(crate) fn no_handler(path: &str) -> String {
    format!("no handler for endpoint {path}")
}

/// The registered part of an endpoint: its path and current handler. The
/// `NetApp` holds this, not the `Endpoint`, so that no reference cycle keeps
/// a `NetApp` alive forever.
pub(crate) struct HandlerSlot<M, H> {
    path: String,
    handler: RwLock<Option<Arc<H>>>,
    _msg: PhantomData<fn(M)>,
}

impl<M, H> HandlerSlot<M, H> {
    fn get(&self) -> Option<Arc<H>> {
        self.handler.read().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl<M: Message, H: EndpointHandler<M>> ErasedHandler for HandlerSlot<M, H> {
    async fn handle_raw(
        &self,
        msg: Bytes,
        body: Option<ByteStream>,
        from: NodeId,
    ) -> Result<(Vec<u8>, Option<ByteStream>), String> {
        let handler = self.get().ok_or_else(|| no_handler(&self.path))?;
        // The message, then maybe the caller's trace context.
        let mut cursor = std::io::Cursor::new(&msg[..]);
        let decoded: M =
            serde::Deserialize::deserialize(&mut rmp_serde::Deserializer::new(&mut cursor))
                .map_err(|e| format!("cannot decode message for endpoint {}: {e}", self.path))?;
        let parent = crate::trace::TraceParent::decode(&msg[cursor.position() as usize..]);
        let serve = handler.handle_streaming(decoded, body, from);
        let (resp, body) = match parent {
            Some(parent) => {
                let span = tracing::debug_span!(
                    "rpc serve",
                    otel.name = format!("RPC serve {}", self.path),
                    rpc.endpoint = self.path.as_str(),
                    rpc.from = %from.short(),
                );
                crate::trace::adopt(&span, parent);
                serve.instrument(span).await
            }
            None => serve.await,
        };
        let resp = rmp_serde::to_vec_named(&resp)
            .map_err(|e| format!("cannot encode response of endpoint {}: {e}", self.path))?;
        Ok((resp, body))
    }
}

/// One endpoint, named by a path such as `garage_rpc/ping`: call it on
/// other nodes, and serve it here once a handler is set.
pub struct Endpoint<M, H> {
    netapp: Arc<NetApp>,
    slot: Arc<HandlerSlot<M, H>>,
}

impl<M: Message, H: EndpointHandler<M>> Endpoint<M, H> {
    pub(crate) fn new(netapp: Arc<NetApp>, path: &str) -> (Self, Arc<dyn ErasedHandler>) {
        let slot = Arc::new(HandlerSlot {
            path: path.to_string(),
            handler: RwLock::new(None),
            _msg: PhantomData,
        });
        (
            Endpoint {
                netapp,
                slot: slot.clone(),
            },
            slot,
        )
    }

    pub fn path(&self) -> &str {
        &self.slot.path
    }

    /// Sets (or replaces) the handler serving this endpoint on this node.
    pub fn set_handler(&self, h: Arc<H>) {
        *self.slot.handler.write().unwrap() = Some(h);
    }

    pub async fn call(
        &self,
        target: &NodeId,
        msg: M,
        prio: Priority,
    ) -> Result<M::Response, NetError> {
        self.call_streaming(target, msg, None, prio)
            .await
            .map(|(resp, _)| resp)
    }

    /// Calls the endpoint on `target`, sending `body` after the message.
    /// Returns once the response header arrived; a response body is then
    /// read from the returned stream at the caller's pace (and dropping it
    /// tells the other side to stop). `rpc_timeout` bounds the time until
    /// the response header, not the reading of the response body.
    pub async fn call_streaming(
        &self,
        target: &NodeId,
        msg: M,
        body: Option<ByteStream>,
        prio: Priority,
    ) -> Result<(M::Response, Option<ByteStream>), NetError> {
        let path = self.slot.path.as_str();
        let span = tracing::debug_span!(
            "rpc",
            otel.name = format!("RPC {path}"),
            rpc.endpoint = path,
            rpc.to = %target.short(),
            otel.status_code = tracing::field::Empty,
        );
        let started = std::time::Instant::now();
        let res = self
            .call_inner(target, msg, body, prio)
            .instrument(span.clone())
            .await;
        crate::metrics::record_call(path, target, started.elapsed(), &res);
        if let Err(e) = &res {
            span.record("otel.status_code", "ERROR");
            tracing::debug!(parent: &span, "RPC {path} to {target:?} failed: {e}");
        }
        res
    }

    async fn call_inner(
        &self,
        target: &NodeId,
        msg: M,
        body: Option<ByteStream>,
        prio: Priority,
    ) -> Result<(M::Response, Option<ByteStream>), NetError> {
        let timeout = self.netapp.config().rpc_timeout;
        if *target == self.netapp.id() {
            // Ourselves: no serialization, no network.
            let h = self
                .slot
                .get()
                .ok_or_else(|| NetError::Remote(no_handler(&self.slot.path)))?;
            return tokio::time::timeout(timeout, h.handle_streaming(msg, body, *target))
                .await
                .map_err(|_| NetError::Timeout(timeout));
        }
        let conn = self
            .netapp
            .conn(target)
            .ok_or(NetError::NotConnected(*target))?;
        let mut msg = rmp_serde::to_vec_named(&msg).map_err(|e| NetError::Codec(e.to_string()))?;
        if let Some(t) = crate::trace::current() {
            msg.extend_from_slice(&t.encode());
        }
        let (resp, body) = conn.call(&self.slot.path, msg, body, prio, timeout).await?;
        let resp = rmp_serde::from_slice(&resp).map_err(|e| {
            NetError::Codec(format!(
                "cannot decode response of endpoint {}: {e}",
                self.slot.path
            ))
        })?;
        Ok((resp, body))
    }
}
