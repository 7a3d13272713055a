# The same image `make image` writes without a container engine: bindery and
# bindery-cni static, Debian's CA certificates and time zones, user 65532
# owning its home and /var/lib/bindery (where volumes go), no shell.
# `make image` stays the reproducible way (fixed timestamps).
#
#   docker build --build-arg VERSION=$(tools/version.sh) -t bindery .
#
# VERSION is the version the programs report (the build context leaves
# .git out, so the build cannot work it out itself).

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION
RUN test -n "$VERSION" || { echo 'build with --build-arg VERSION=$(tools/version.sh)' >&2; exit 1; } && \
    ldflags="-s -w -X github.com/bindery-dev/bindery/internal/version.version=$VERSION" && \
    CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o /out/bindery ./cmd/bindery && \
    CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o /out/bindery-cni ./cmd/bindery-cni

FROM debian:bookworm-slim AS files
RUN apt-get update && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates tzdata && \
    mkdir -p /rootfs/etc/ssl/certs /rootfs/usr/share /rootfs/home/nonroot /rootfs/var/lib/bindery /rootfs/tmp && \
    cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ && \
    cp -a /usr/share/zoneinfo /rootfs/usr/share/ && \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /rootfs/etc/passwd && \
    printf 'root:x:0:\nnonroot:x:65532:\n' > /rootfs/etc/group && \
    chmod 1777 /rootfs/tmp && \
    chown 65532:65532 /rootfs/home/nonroot /rootfs/var/lib/bindery && \
    chmod 0700 /rootfs/var/lib/bindery

FROM scratch
COPY --from=files /rootfs/ /
COPY --from=build /out/bindery /out/bindery-cni /usr/local/bin/
USER 65532:65532
WORKDIR /home/nonroot
ENV PATH=/usr/local/bin HOME=/home/nonroot SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
ARG VERSION
LABEL org.opencontainers.image.title=bindery org.opencontainers.image.source=https://github.com/bindery-dev/bindery \
      org.opencontainers.image.version=$VERSION
ENTRYPOINT ["/usr/local/bin/bindery"]
