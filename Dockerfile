# syntax=docker/dockerfile:1
# kuota's image: a static musl build, copied alone into a distroless "static" base that
# runs as nonroot (65532, the uid the Deployment sets). No shell, no package manager.
#   docker build -t kuota:0.1.0 .
# CI lints this file with hadolint (.ci/run); no container engine runs here to build it.

FROM rust:1.95-alpine AS build
# musl-dev for the static link; ring (TLS) compiles C and assembly.
RUN apk add --no-cache musl-dev=~1 make=~4 perl=~5
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
# Every target Cargo.toml declares must exist for cargo to read the manifest.
COPY src ./src
COPY benches ./benches
COPY tests ./tests
COPY examples ./examples
COPY policies ./policies
# The webhook configurations `kuota serve --local-webhooks` registers, compiled in.
COPY manifests/base/mutating-webhook.yaml manifests/base/validating-webhook.yaml ./manifests/base/
RUN cargo build --locked --release --bin kuota \
    && cp target/release/kuota /kuota

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /kuota /kuota
# The same binary as kubectl's plugin: `kubectl kuota pending ...` once it is on the PATH
# (`docker cp` it out, or `kubectl krew`-style install). No shell here for a symlink.
COPY --from=build /kuota /kubectl-kuota
USER 65532:65532
# Webhook, probes and /metrics, Kueue's visibility API.
EXPOSE 9443 8080 8082
ENTRYPOINT ["/kuota"]
CMD ["serve"]
