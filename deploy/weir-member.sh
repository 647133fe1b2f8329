#!/bin/sh
# weir-member: one `weir serve` member (or a `weir worker`) from environment
# variables. The one command line the Dockerfile, the compose file, the
# Kubernetes manifests and the systemd unit share; tests/deploy_manifests.rs
# runs it as they do, so they cannot drift from the flags weir takes.
#
#   WEIR_ROLE          member (default) or worker
#   WEIR_DEFS          the definitions folder                  (member)
#   WEIR_DATA          the data directory      [/var/lib/weir] (member)
#   WEIR_LISTEN        the API and UI          [0.0.0.0:7450]  (member)
#   WEIR_TOKEN_FILE    the API's shared token file             (member)
#   WEIR_TLS_CERT, WEIR_TLS_KEY   the API's TLS (and, without WEIR_PEER_CERT, the members')
#   WEIR_INSECURE_HTTP=1          plain HTTP on a non-loopback WEIR_LISTEN
#   WEIR_CLUSTER       where workers join      [none]          (member)
#   WEIR_COOKIE_FILE   the members' and workers' shared secret
#   WEIR_RAFT_PEERS    1=HOST:PORT,2=…,3=…: a replicated engine's members
#   WEIR_RAFT_ID       this member's id; unset: the StatefulSet ordinal of
#                      $HOSTNAME (weir-0 is 1, weir-1 is 2, …)
#   WEIR_PEER_CA       mutual TLS between members (with WEIR_PEER_CERT/KEY
#                      or WEIR_TLS_CERT/KEY)
#   WEIR_PEER_CERT, WEIR_PEER_KEY
#   WEIR_INSECURE_RAFT_HTTP=1     plain Raft traffic off loopback
#   WEIR_ELECTION_TIMEOUT_MS      [400]
#   WEIR_BACKUP_DIR    scheduled backups into this folder (member)
#   WEIR_BACKUP_EVERY, WEIR_BACKUP_KEEP   [6h, 7d]
#   WEIR_JOIN          a worker's members' cluster addresses, HOST:PORT,…
#   WEIR_POOLS         a worker's pools, NAME=SLOTS,…  [default=4]
#   WEIR_NAME          a worker's name     [$HOSTNAME]
#   WEIR_WORKER_ROOT   where a worker runs commands (their cwd's root)
#   WEIR_TLS_CA        a worker's CA for members that serve TLS
#   WEIR_ARTIFACTS     where artifacts are kept: s3://BUCKET/PREFIX, gs://…,
#                      az://… or file:///shared (members and workers; the
#                      store's keys in AWS_*/GOOGLE_*/AZURE_* variables)
#   WEIR_ARTIFACTS_CREDENTIALS    a file of NAME=VALUE lines for that store
# Extra arguments are passed to weir as they are.
set -eu

role="${WEIR_ROLE:-member}"
# Members and workers reach the same artifact store.
if [ -n "${WEIR_ARTIFACTS:-}" ]; then
    set -- "$@" --artifacts "$WEIR_ARTIFACTS"
    if [ -n "${WEIR_ARTIFACTS_CREDENTIALS:-}" ]; then
        set -- "$@" --artifacts-credentials "$WEIR_ARTIFACTS_CREDENTIALS"
    fi
fi
if [ "$role" = worker ]; then
    : "${WEIR_JOIN:?WEIR_JOIN: the members' cluster addresses (HOST:PORT,...)}"
    : "${WEIR_COOKIE_FILE:?WEIR_COOKIE_FILE: the cluster's cookie file}"
    set -- --join "$WEIR_JOIN" --cookie-file "$WEIR_COOKIE_FILE" --name "${WEIR_NAME:-${HOSTNAME:-worker}}" "$@"
    old_ifs="$IFS"; IFS=,
    for pool in ${WEIR_POOLS:-default=4}; do
        set -- "$@" --pool "$pool"
    done
    IFS="$old_ifs"
    if [ -n "${WEIR_WORKER_ROOT:-}" ]; then
        set -- "$@" --root "$WEIR_WORKER_ROOT"
    fi
    if [ -n "${WEIR_TLS_CA:-}" ]; then
        set -- "$@" --tls-ca "$WEIR_TLS_CA"
    fi
    exec weir worker "$@"
fi
if [ "$role" != member ]; then
    echo "weir-member: WEIR_ROLE=$role: write member or worker" >&2
    exit 2
fi

: "${WEIR_DEFS:?WEIR_DEFS: the definitions folder}"
: "${WEIR_TOKEN_FILE:?WEIR_TOKEN_FILE: the API token file every member shares}"
set -- --data "${WEIR_DATA:-/var/lib/weir}" --listen "${WEIR_LISTEN:-0.0.0.0:7450}" \
    --token-file "$WEIR_TOKEN_FILE" "$@"
if [ -n "${WEIR_TLS_CERT:-}" ]; then
    set -- "$@" --tls-cert "$WEIR_TLS_CERT" --tls-key "${WEIR_TLS_KEY:?WEIR_TLS_KEY goes with WEIR_TLS_CERT}"
elif [ "${WEIR_INSECURE_HTTP:-0}" = 1 ]; then
    set -- "$@" --insecure-http
fi
if [ -n "${WEIR_CLUSTER:-}" ]; then
    set -- "$@" --cluster "$WEIR_CLUSTER"
fi
if [ -n "${WEIR_COOKIE_FILE:-}" ]; then
    set -- "$@" --cookie-file "$WEIR_COOKIE_FILE"
fi
if [ -n "${WEIR_BACKUP_DIR:-}" ]; then
    set -- "$@" --backup-dir "$WEIR_BACKUP_DIR" --backup-every "${WEIR_BACKUP_EVERY:-6h}" \
        --backup-keep "${WEIR_BACKUP_KEEP:-7d}"
fi
if [ -n "${WEIR_RAFT_PEERS:-}" ]; then
    id="${WEIR_RAFT_ID:-}"
    if [ -z "$id" ]; then
        ordinal="${HOSTNAME##*-}"
        case "$ordinal" in
            ''|*[!0-9]*)
                echo "weir-member: set WEIR_RAFT_ID, or run as a StatefulSet pod named NAME-ORDINAL (HOSTNAME=${HOSTNAME:-})" >&2
                exit 2 ;;
        esac
        id=$((ordinal + 1))
    fi
    set -- "$@" --raft-id "$id" --raft-peers "$WEIR_RAFT_PEERS" \
        --election-timeout-ms "${WEIR_ELECTION_TIMEOUT_MS:-400}"
    if [ -n "${WEIR_PEER_CA:-}" ]; then
        set -- "$@" --peer-ca "$WEIR_PEER_CA"
        if [ -n "${WEIR_PEER_CERT:-}" ]; then
            set -- "$@" --peer-cert "$WEIR_PEER_CERT" --peer-key "${WEIR_PEER_KEY:?WEIR_PEER_KEY goes with WEIR_PEER_CERT}"
        fi
    elif [ "${WEIR_INSECURE_RAFT_HTTP:-0}" = 1 ]; then
        set -- "$@" --insecure-raft-http
    fi
fi
exec weir serve "$WEIR_DEFS" "$@"
