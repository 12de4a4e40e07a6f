# tailcut: one static-ish binary on a slim base.
#   docker build -t tailcut .            (add --build-arg FEATURES=cuda for the CUDA agents)
# Built with the `dist` profile (fat LTO, one codegen unit: Cargo.toml says why).
FROM rust:1-bookworm AS build
ARG FEATURES=""
WORKDIR /src
COPY . .
RUN cargo build --profile dist --locked -p tailcut-cli ${FEATURES:+--features $FEATURES}

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home /var/lib/tailcut tailcut && mkdir -p /var/lib/tailcut && chown tailcut /var/lib/tailcut
COPY --from=build /src/target/dist/tailcut /usr/local/bin/tailcut
USER tailcut
WORKDIR /var/lib/tailcut
EXPOSE 8080
ENTRYPOINT ["tailcut"]
CMD ["serve", "--config", "/etc/tailcut/tailcut.toml", "--listen", "0.0.0.0:8080"]
