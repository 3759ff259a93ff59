# Build the single compiled binary (Bun comes from npm, as everywhere in this project), then ship
# it alone on a small glibc base. Redis is external: set REDIS_URL.
FROM node:20-bookworm AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm install --no-audit --no-fund
COPY . .
RUN npm run build

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 svc
COPY --from=build /src/dist/svc-gateway /usr/local/bin/svc-gateway
USER svc
ENV PORT=8080 HOST=0.0.0.0
# Supplier calls use the gateway's own client; fetch (the catalog sync, video downloads) is capped
# at 256 concurrent requests by Bun unless told otherwise.
ENV BUN_CONFIG_MAX_HTTP_REQUESTS=8192
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/svc-gateway"]
CMD ["serve"]
