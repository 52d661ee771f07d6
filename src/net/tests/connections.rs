//! Connection management over real TCP on 127.0.0.1: handshakes, refusals,
//! garbage, duplicate connections.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use garage_net::{EndpointHandler, Message, NetConfig, NetError, NodeId, Priority};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Serialize, Deserialize)]
struct Ping(u64);
impl Message for Ping {
    type Response = u64;
}
struct Echo;
#[async_trait::async_trait]
impl EndpointHandler<Ping> for Echo {
    async fn handle(&self, msg: Ping, _from: NodeId) -> u64 {
        msg.0 + 1
    }
}

fn serve_ping(n: &Node) -> Arc<garage_net::Endpoint<Ping, Echo>> {
    let e = n.app.endpoint::<Ping, Echo>("test/ping");
    e.set_handler(Arc::new(Echo));
    e
}

fn peers(n: &Node) -> Vec<NodeId> {
    n.app
        .connected_peers()
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_in_both_directions_learns_node_ids() {
    let (a, b) = (node().await, node().await);
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    b.app
        .on_connected(move |id, _, incoming| ev.lock().unwrap().push((id, incoming)));

    // a dials b, without knowing b's id in advance.
    assert_eq!(a.app.connect(b.addr, None).await.unwrap(), b.app.id());
    assert_eq!(a.app.connected_peers(), vec![(b.app.id(), b.addr)]);
    // The listener registers the connection before it confirms the
    // handshake: no waiting needed.
    assert_eq!(peers(&b), vec![a.app.id()]);
    assert_eq!(events.lock().unwrap().as_slice(), &[(a.app.id(), true)]);
    let e = serve_ping(&b);
    assert_eq!(
        e.call(&b.app.id(), Ping(1), Priority::High).await.unwrap(),
        2
    );

    // Now the other way round.
    a.app.disconnect(&b.app.id());
    wait_until(|| a.app.connected_peers().is_empty() && b.app.connected_peers().is_empty()).await;
    assert_eq!(
        b.app.connect(a.addr, Some(a.app.id())).await.unwrap(),
        a.app.id()
    );
    assert_eq!(b.app.connected_peers(), vec![(a.app.id(), a.addr)]);
    assert_eq!(events.lock().unwrap().last(), Some(&(a.app.id(), false)));
    let ea = serve_ping(&a);
    assert_eq!(peers(&a), vec![b.app.id()]);
    assert_eq!(
        e.call(&a.app.id(), Ping(5), Priority::High).await.unwrap(),
        6
    );
    assert_eq!(
        ea.call(&b.app.id(), Ping(7), Priority::High).await.unwrap(),
        8
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_network_key_fails_on_both_sides() {
    let a = node_with(net_key(1), NetConfig::default()).await;
    let b = node_with(net_key(2), NetConfig::default()).await;
    for (from, to) in [(&a, &b), (&b, &a)] {
        match from.app.connect(to.addr, None).await {
            Err(NetError::Handshake(m)) => assert!(m.contains("rpc_secret"), "{m}"),
            r => panic!("expected a handshake error, got {r:?}"),
        }
    }
    assert!(a.app.connected_peers().is_empty());
    assert!(b.app.connected_peers().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unexpected_node_id_is_refused() {
    let (a, b) = (node().await, node().await);
    let other = garage_net::NodeKey::generate().id();
    match a.app.connect(b.addr, Some(other)).await {
        Err(NetError::WrongPeer { expected, got }) => {
            assert_eq!(expected, other);
            assert_eq!(got, b.app.id());
        }
        r => panic!("expected WrongPeer, got {r:?}"),
    }
    assert!(a.app.connected_peers().is_empty());
    assert!(b.app.connected_peers().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialing_ourselves_is_refused() {
    let a = node().await;
    assert!(matches!(
        a.app.connect(a.addr, None).await,
        Err(NetError::Ourselves)
    ));
    assert!(a.app.connected_peers().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_reuses_the_existing_connection() {
    let (a, b) = (node().await, node().await);
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    a.app.on_connected(move |_, _, _| {
        c.fetch_add(1, Ordering::SeqCst);
    });
    a.app.connect(b.addr, None).await.unwrap();
    a.app.connect(b.addr, None).await.unwrap();
    a.app.connect(b.addr, Some(b.app.id())).await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert_eq!(a.app.connected_peers().len(), 1);
}

/// Concurrent `connect`s to one peer (a peering loop and an explicit
/// connect, as a node joining does) open one connection: a duplicate would
/// replace the first and fail the calls already in flight on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_connects_to_one_peer_open_one_connection() {
    for _ in 0..5 {
        let (a, b) = (node().await, node().await);
        let seen = Arc::new(AtomicUsize::new(0));
        let s = seen.clone();
        b.app.on_connected(move |_, _, _| {
            s.fetch_add(1, Ordering::SeqCst);
        });
        let id = b.app.id();
        let (r1, r2, r3) = tokio::join!(
            a.app.connect(b.addr, Some(id)),
            a.app.connect(b.addr, None),
            a.app.connect(b.addr, Some(id)),
        );
        assert_eq!((r1.unwrap(), r2.unwrap(), r3.unwrap()), (id, id, id));
        assert_eq!(seen.load(Ordering::SeqCst), 1, "b saw one connection");
        assert_eq!(a.app.connected_peers(), vec![(id, b.addr)]);
    }
}

/// Connects a raw socket to `addr`, sends `bytes`, and waits until the node
/// hangs up.
async fn send_garbage_and_expect_hangup(addr: std::net::SocketAddr, bytes: &[u8]) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut buf = [0u8; 256];
    within(async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break, // closed or reset
                Ok(_) => {}              // the node's own handshake bytes
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_peer_is_dropped_and_others_keep_working() {
    let a = node().await;
    let config = NetConfig {
        handshake_timeout: Duration::from_secs(1),
        ..NetConfig::default()
    };
    let b = node_with(net_key(1), config).await;
    a.app.connect(b.addr, Some(b.app.id())).await.unwrap();
    let ping = serve_ping(&b);
    let _ = serve_ping(&a);

    let garbage: Vec<u8> = (0..1000).map(|_| rand::random::<u8>()).collect();
    send_garbage_and_expect_hangup(b.addr, &garbage).await;
    assert_eq!(
        ping.call(&a.app.id(), Ping(1), Priority::High)
            .await
            .unwrap(),
        2
    );

    // The right preamble followed by garbage: refused by Noise, or by the
    // handshake timeout if the garbage announces a long message.
    let mut g2 = garage_net::PREAMBLE.to_vec();
    g2.extend_from_slice(&garbage);
    send_garbage_and_expect_hangup(b.addr, &g2).await;
    // A connection that stays silent is dropped after the handshake timeout.
    send_garbage_and_expect_hangup(b.addr, &[]).await;

    assert_eq!(
        ping.call(&a.app.id(), Ping(2), Priority::High)
            .await
            .unwrap(),
        3
    );
    assert_eq!(peers(&b), vec![a.app.id()]);
    assert_eq!(peers(&a), vec![b.app.id()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_dial_ends_with_one_connection() {
    for _ in 0..5 {
        let (a, b) = (node().await, node().await);
        let (ra, rb) = tokio::join!(a.app.connect(b.addr, None), b.app.connect(a.addr, None));
        assert_eq!(ra.unwrap(), b.app.id());
        assert_eq!(rb.unwrap(), a.app.id());
        // The connection kept is the one dialed by the smaller id: the
        // smaller node sees the other's listening address, the larger one
        // an ephemeral source port.
        let (small, large) = if a.app.id() < b.app.id() {
            (&a, &b)
        } else {
            (&b, &a)
        };
        wait_until(|| {
            small.app.connected_peers() == vec![(large.app.id(), large.addr)]
                && large
                    .app
                    .connected_peers()
                    .iter()
                    .all(|(p, addr)| *p == small.app.id() && *addr != small.addr)
                && large.app.connected_peers().len() == 1
        })
        .await;
        let ea = serve_ping(&a);
        let eb = serve_ping(&b);
        assert_eq!(
            ea.call(&b.app.id(), Ping(1), Priority::High).await.unwrap(),
            2
        );
        assert_eq!(
            eb.call(&a.app.id(), Ping(2), Priority::High).await.unwrap(),
            3
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_serves_until_told_to_exit() {
    let a = node().await;
    let b = garage_net::NetApp::new(
        net_key(1),
        garage_net::NodeKey::generate(),
        NetConfig::default(),
    );
    // A free port: bind port 0, note it, release it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let (stop, must_exit) = tokio::sync::watch::channel(false);
    let listening = tokio::spawn(b.clone().listen(addr, must_exit));
    // `listen` binds in its own task: retry until it accepts.
    let start = std::time::Instant::now();
    while a.app.connect(addr, Some(b.id())).await.is_err() {
        assert!(start.elapsed() < DEADLINE, "listen never accepted");
        tokio::task::yield_now().await;
    }
    stop.send(true).unwrap();
    within(listening).await.unwrap().unwrap();
    // The established connection outlives the accept loop.
    let (b2, aid) = (b.clone(), a.app.id());
    wait_until(move || b2.connected_peers().iter().any(|(p, _)| *p == aid)).await;
}

/// Silent connections from one address beyond its share are closed at
/// once, the admitted ones after the first-byte timeout (well before the
/// handshake timeout), and a node dialing from another address gets in
/// while the first one floods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_connections_are_capped_and_closed_early() {
    let config = NetConfig {
        admission: garage_net::admission::Limits {
            total: 8,
            per_ip: 4,
        },
        first_byte_timeout: Duration::from_secs(2),
        handshake_timeout: Duration::from_secs(60),
        ..NetConfig::default()
    };
    let b = node_with(net_key(1), config).await;
    let _ = serve_ping(&b);
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(tokio::net::TcpStream::connect(b.addr).await.unwrap());
    }
    wait_until(|| b.app.handshakes_running() == 4).await;

    // Another address is still admitted: a real node dials from 127.0.0.2.
    let a = node_with(
        net_key(1),
        NetConfig {
            bind_outgoing: Some("127.0.0.2".parse().unwrap()),
            ..NetConfig::default()
        },
    )
    .await;
    let ping = serve_ping(&a);
    within(a.app.connect(b.addr, Some(b.app.id())))
        .await
        .unwrap();
    assert_eq!(
        ping.call(&b.app.id(), Ping(1), Priority::High)
            .await
            .unwrap(),
        2
    );

    // Every silent connection is closed well within the 60 s handshake
    // timeout: 16 refused at once, 4 after the 2 s first-byte timeout.
    let mut buf = [0u8; 64];
    for s in silent.iter_mut() {
        within(async {
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        })
        .await;
    }
    wait_until(|| b.app.handshakes_running() == 0).await;
    assert_eq!(peers(&b), vec![a.app.id()]);
}
