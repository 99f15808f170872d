# Dockerfile - the dpbudgetd container image (issue 8).
#
#   docker build -t dpbudget/dpbudgetd:0.3.0 .
#   docker run -d --name dpbudgetd -p 8080:8080 -v dpbudget-data:/var/lib/dpbudget \
#       -v "$PWD/api-keys:/etc/dpbudget/api-keys:ro" dpbudget/dpbudgetd:0.3.0
#
# The daemon listens on 0.0.0.0 in the container, so it needs API keys: the image reads them
# from /etc/dpbudget/api-keys (ENV DPBUDGET_API_KEYS below): mount your keys file there, as
# above, or set DPBUDGET_API_KEYS (or --api-keys) to where you mount it. The file holds
# only SHA-256 hashes of the tokens, lines '<sha256 hex of token> <scopes> [name]' (make
# one: printf %s "$TOKEN" | sha256sum; more in deploy/k8s/secret.yaml), so no secret is in
# the image, its environment or its logs. With nothing there the daemon exits 2 at once,
# saying which file and which variable to set. tests/deploy/check_deploy.py runs this
# image's ENV, ENTRYPOINT and CMD on the installed binary, with and without the file.
# The tag above and the version LABEL below must equal `dpbudgetd --version` (VERSION in
# the Makefile): tests/deploy/check_deploy.py checks both, and that the deploy/ manifests
# use the same image.

# ---- build stage: toolchain and -dev packages, installed by the script developers use ----
FROM debian:12 AS build
WORKDIR /src
# deps.sh alone first, so that the apt layer stays cached when only the sources change.
# It runs apt-get itself when something is missing (as root here: no sudo needed); --build
# leaves out the test tools (browser, promtool).
COPY scripts/deps.sh scripts/apt-install.sh scripts/
RUN sh scripts/deps.sh --build && rm -rf /var/lib/apt/lists/*
# .dockerignore keeps any host build/ tree out: make would take its objects (linked against
# the host's libraries) as up to date.
COPY . .
RUN make -j"$(nproc)" all && make install PREFIX=/usr/local DESTDIR=/out

# ---- runtime stage: the shared libraries dpbudgetd links, nothing to compile with ----
FROM debian:12-slim
LABEL org.opencontainers.image.title="dpbudgetd" \
      org.opencontainers.image.description="dpbudget: a differential-privacy budget service" \
      org.opencontainers.image.version="0.3.0" \
      org.opencontainers.image.licenses="GPL-3.0-or-later"
# libgsl27 pulls libgslcblas0; libgnutls30 (TLS policy, health probe) and libnettle8
# (SHA-256 of API keys) are linked directly, so named though libmicrohttpd12 pulls them;
# libpq5 is the PostgreSQL client (--ledger-url; no server in the image); libcurl is for the
# tests only and is not installed.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libmicrohttpd12 libjansson4 libgsl27 libfftw3-double3 libfftw3-long3 libgnutls30 libnettle8 libpq5 \
    && rm -rf /var/lib/apt/lists/*
# A fixed uid/gid (10001, deploy/k8s/statefulset.yaml runs as the same) that owns the data
# directory. --no-log-init: no sparse /var/log/lastlog entry for a high uid.
RUN groupadd --gid 10001 dpbudget \
    && useradd --no-log-init --uid 10001 --gid 10001 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin dpbudget \
    && install -d -o dpbudget -g dpbudget -m 0700 /var/lib/dpbudget
COPY --from=build /out/usr/local/ /usr/local/
# Numeric, so that Kubernetes' runAsNonRoot can verify it without a runAsUser.
USER 10001:10001
# Where the API keys file is read (mounted): see the top of this file.
ENV DPBUDGET_API_KEYS=/etc/dpbudget/api-keys
WORKDIR /var/lib/dpbudget
# Declared after the chown: a new named volume starts with this directory's owner and mode.
# (A bind mount keeps the host directory's owner: make it writable by uid 10001.)
VOLUME /var/lib/dpbudget
EXPOSE 8080
# dpbudgetd stops on SIGTERM: it finishes in-flight requests, then writes a snapshot.
# A large ledger can take longer than docker stop's default 10 s: use `docker stop -t 60`.
STOPSIGNAL SIGTERM
# A real GET /healthz by the daemon's own probe (dpbudgetd --healthcheck: no curl in the
# image). It reads the same DPBUDGET_* environment as the daemon, so it speaks TLS when
# DPBUDGET_TLS_CERT/DPBUDGET_TLS_KEY turn TLS on (and pins that certificate); the port is
# the --port of CMD below (flags are not shared with CMD: whoever changes one changes both).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["dpbudgetd", "--healthcheck", "--port", "8080"]
ENTRYPOINT ["dpbudgetd"]
# Flags, so they take precedence over DPBUDGET_* variables and a --config file; everything
# else (API keys, TLS, tuning) can come from the environment.
CMD ["--listen", "0.0.0.0", "--port", "8080", "--data-dir", "/var/lib/dpbudget"]
