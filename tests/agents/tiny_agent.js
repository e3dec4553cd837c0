// A tiny Node "agent": POSTs one Messages API request (body read from a file) to LLM_URL,
// honouring HTTPS_PROXY / NO_PROXY the way real Node agents do (an HTTP CONNECT tunnel,
// then TLS verified with Node's roots plus NODE_EXTRA_CA_CERTS). No other set-up.
// Usage: node tiny_agent.js BODY.json   (env: LLM_URL, EXIT_CODE)
"use strict";
const fs = require("fs");
const http = require("http");
const https = require("https");
const tls = require("tls");

const target = new URL(process.env.LLM_URL);
const body = fs.readFileSync(process.argv[2]);
const proxy = process.env.HTTPS_PROXY || process.env.https_proxy || "";
const noProxy = (process.env.NO_PROXY || process.env.no_proxy || "").split(",").map((s) => s.trim()).filter(Boolean);
const bypass = noProxy.some((h) => target.hostname === h || target.hostname.endsWith("." + h.replace(/^\./, "")));
const headers = {
  "content-type": "application/json",
  "content-length": body.length,
  "anthropic-version": "2023-06-01",
  "x-api-key": "test-key",
  "user-agent": "tiny-node-agent/1.0",
};

function send(createConnection) {
  const req = https.request(
    { hostname: target.hostname, port: target.port || 443, path: target.pathname, method: "POST", headers, createConnection },
    (res) => {
      let data = "";
      res.on("data", (c) => (data += c));
      res.on("end", () => {
        const reply = JSON.parse(data);
        console.log(`status ${res.statusCode}: ${reply.content[0].text}`);
        process.exit(Number(process.env.EXIT_CODE || 0));
      });
    },
  );
  req.on("error", (e) => { console.error(`request failed: ${e.message}`); process.exit(90); });
  req.end(body);
}

if (!proxy || bypass) {
  send(undefined);
} else {
  const p = new URL(proxy);
  const connect = http.request({ host: p.hostname, port: p.port, method: "CONNECT", path: `${target.hostname}:${target.port || 443}` });
  connect.on("connect", (res, socket) => {
    if (res.statusCode !== 200) { console.error(`proxy said ${res.statusCode}`); process.exit(91); }
    const sni = require("net").isIP(target.hostname) ? undefined : target.hostname;
    send(() => tls.connect({ socket, host: target.hostname, servername: sni }));
  });
  connect.on("error", (e) => { console.error(`proxy failed: ${e.message}`); process.exit(92); });
  connect.end();
}
