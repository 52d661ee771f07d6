# syntax=docker/dockerfile:1
# garage in a container: a slim Debian image running as a non-root user,
# configured by /etc/garage.toml (script/docker/garage.toml, replace it with
# a volume or a bind mount) and by environment variables for secrets
# (GARAGE_RPC_SECRET, GARAGE_ADMIN_TOKEN, ... or their *_FILE forms).
# State under /var/lib/garage (a volume). See doc/deploy.md.
#
#   docker build -t garage .
#   docker run -d --name garage -p 3900:3900 -p 3902:3902 -p 3903:3903 \
#     -v garage-state:/var/lib/garage garage

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p garage --bin garage \
    && strip target/release/garage

FROM debian:bookworm-slim
# curl: the health check only.
RUN apt-get update \
    && apt-get install -y --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 1000 --user-group --home-dir /var/lib/garage \
       --shell /usr/sbin/nologin garage \
    && mkdir -p /var/lib/garage/meta /var/lib/garage/data \
    && chown -R garage:garage /var/lib/garage \
    && chmod 0700 /var/lib/garage
COPY --from=build /src/target/release/garage /usr/local/bin/garage
COPY script/docker/garage.toml /etc/garage.toml
USER garage:garage
VOLUME ["/var/lib/garage"]
# S3, RPC, website, admin.
EXPOSE 3900 3901 3902 3903
ENV RUST_LOG=garage=info
# /health answers 200 once every partition has a quorum of nodes up: a
# fresh node is unhealthy until it has a layout (doc/cluster.md).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD curl -fsS -o /dev/null http://127.0.0.1:3903/health || exit 1
ENTRYPOINT ["/usr/local/bin/garage"]
CMD ["server"]
