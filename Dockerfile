# weir: one image for members, single engines and workers.
#   docker build -t weir .
#   docker run -v weir-data:/var/lib/weir -v $PWD/defs:/etc/weir/defs:ro \
#     -v $PWD/token:/run/secrets/weir/token:ro -e WEIR_INSECURE_HTTP=1 -p 7450:7450 weir
# The entrypoint is deploy/weir-member.sh: configured by environment
# variables (see that file and docs/deploy.md).
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin weir

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/weir --shell /usr/sbin/nologin weir \
 && mkdir -p /var/lib/weir /etc/weir/defs \
 && chown weir:weir /var/lib/weir
COPY --from=build /src/target/release/weir /usr/local/bin/weir
COPY deploy/weir-member.sh /usr/local/bin/weir-member
# Non-root; the data directory is a volume (sled's files, the store mark,
# engine.json).
USER 10001:10001
VOLUME ["/var/lib/weir"]
ENV WEIR_DATA=/var/lib/weir WEIR_DEFS=/etc/weir/defs
# 7450 the API and UI, 7451 workers (--cluster), 7501 Raft between members.
EXPOSE 7450 7451 7501
# tini forwards SIGTERM (a clean stop) and reaps the commands nodes run.
ENTRYPOINT ["tini", "--", "weir-member"]
