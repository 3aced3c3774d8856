# syntax=docker/dockerfile:1
#
# The maestro image: the engine service runs it with `engine` (the default
# command). The CDK app builds it for linux/arm64 (Graviton Fargate).
# Build by hand with:
#   docker build --platform linux/arm64 -t maestro .

# The builder runs natively and cross-compiles, so an amd64 host needs no
# emulation for the Go build.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH=arm64
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/maestro ./cmd/maestro

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/maestro /maestro
USER nonroot:nonroot
ENTRYPOINT ["/maestro"]
CMD ["engine"]
