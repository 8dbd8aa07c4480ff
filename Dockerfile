# Build the manager binary.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH

WORKDIR /workspace
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download

COPY main.go main.go
COPY api/ api/
COPY controllers/ controllers/
COPY internal/ internal/
# Built into the binary for `manager target-access` (go:embed in main.go).
COPY dist/target-access.yaml dist/target-access.yaml

# A static binary: the runtime image has no libc. The same flags as
# `make image` (hack/image checks it): -buildvcs=false changes nothing here,
# where the context holds no .git, and keeps the binaries identical if it ever
# does.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false -ldflags="-s -w" -o manager .

# Distroless, non-root: nothing but the binary.
FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
