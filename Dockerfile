# abi-engine image: a static binary on distroless, running as a non-root user.
#
#   docker build --build-arg VERSION=1.4.0 -t registry.example.com/abi-engine:1.4.0 .
#
# Tag the image with the version and use the same tag as the deploy's rollout id
# (ABI_ROLLOUT_ID; see docs/operations.md and deploy/kubernetes/deployment.yaml).

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/abi-engine ./cmd/abi-engine

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/abi-engine /usr/local/bin/abi-engine
# The home of the nonroot user is writable: an engine run without a configuration keeps
# its embedded broker's store under data/ there (development only).
WORKDIR /home/nonroot
USER nonroot:nonroot
# The defaults listen on 127.0.0.1, which nothing outside the container reaches: run
# plainly, the image serves /healthz, /readyz, /status and /metrics on 8080 and (role
# serve without nats.url) its embedded broker on 4222, on every interface. A
# configuration file does not override these (the environment wins over the file):
# set them to another address, or unset them (-e ABI_HTTP_LISTEN=) to let the file
# decide.
ENV ABI_HTTP_LISTEN=0.0.0.0:8080 \
    ABI_NATS_EMBEDDED_LISTEN=0.0.0.0:4222
EXPOSE 8080 4222
ENTRYPOINT ["abi-engine","run"]
