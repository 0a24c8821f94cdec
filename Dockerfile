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
# /healthz, /readyz, /status and /metrics, when http.listen is 0.0.0.0:8080.
EXPOSE 8080
ENTRYPOINT ["abi-engine","run"]
