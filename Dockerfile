# Multi-stage build of the redrive binary and the example consumer (examples/orders-consumer).
# confluent-kafka-go links librdkafka through cgo, so the build needs gcc and the runtime the
# same glibc: both stages are Debian bookworm.
#
#   docker build --build-arg VERSION=v1.2.3 -t redrive:v1.2.3 .
#
# Plain Dockerfile instructions only (no BuildKit mounts), so that docker-compose 1.x, BuildKit,
# Podman and Kaniko build it alike; the module download is its own layer and stays cached while
# go.mod and go.sum do not change.

FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=1
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/redrive ./cmd/redrive && \
    go build -trimpath -ldflags "-s -w" -o /out/orders-consumer ./examples/orders-consumer

FROM debian:bookworm-slim AS runtime
# curl is for container healthchecks: curl -fsS http://127.0.0.1:8080/readyz (docker-compose.yml).
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl && \
    rm -rf /var/lib/apt/lists/* && \
    groupadd --system --gid 10001 redrive && \
    useradd --system --uid 10001 --gid redrive --no-create-home --shell /usr/sbin/nologin redrive
COPY --from=build /out/redrive /usr/local/bin/redrive
COPY --from=build /out/orders-consumer /usr/local/bin/orders-consumer
USER 10001:10001
# REDRIVE_HTTP_ADDR (default :8080): the UI, /api/v1, /metrics, /healthz (liveness) and
# /readyz (readiness: Postgres answers and the intake stores what it reads).
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/redrive"]
CMD ["serve"]
