# syntax=docker/dockerfile:1
# Multi-stage build of the redrive binary and the example consumer.
# confluent-kafka-go links librdkafka through cgo, so the build needs gcc and a glibc runtime.

FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=1
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/redrive ./cmd/redrive && \
    go build -trimpath -ldflags "-s -w" -o /out/orders-consumer ./examples/orders-consumer

FROM debian:bookworm-slim AS runtime
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && \
    rm -rf /var/lib/apt/lists/* && \
    groupadd --system --gid 10001 redrive && \
    useradd --system --uid 10001 --gid redrive --no-create-home --shell /usr/sbin/nologin redrive
COPY --from=build /out/redrive /usr/local/bin/redrive
COPY --from=build /out/orders-consumer /usr/local/bin/orders-consumer
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/redrive"]
CMD ["serve"]
