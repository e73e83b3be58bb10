// SPDX-License-Identifier: MIT
'use strict';
// Node.js's http and net modules (libuv: epoll, accept4, writev), for smc_node.sh.
//   node node_net.js servers HTTP_PORT ECHO_PORT
//   node node_net.js clients HTTP_PORT ECHO_PORT FILE N
// The clients POST FILE to the http echo N times over a keep-alive agent of two
// connections, N times with Connection: close, and echo it N times over
// concurrent net connections; every echo is checked by its sha256; one line
// per kind; exit 1 if any differed.
const http = require('http');
const net = require('net');
const fs = require('fs');
const crypto = require('crypto');
const [mode, httpPort, echoPort, file, countArg] = process.argv.slice(2);
let port = Number(httpPort);
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

function httpServer() {
  http.createServer((req, res) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      // two chunks, so the response goes out in one writev
      res.writeHead(200, {'Content-Length': body.length});
      res.write(body.subarray(0, body.length >> 1));
      res.end(body.subarray(body.length >> 1));
    });
  }).listen(port, '127.0.0.1');
}

function post(agent, data) {
  return new Promise((resolve, reject) => {
    const req = http.request({host: '127.0.0.1', port, path: '/echo', method: 'POST', agent,
                              headers: {'Content-Length': data.length}}, (res) => {
      const parts = [];
      res.on('data', (c) => parts.push(c));
      res.on('end', () => resolve([res.statusCode, Buffer.concat(parts), res.headers.connection]));
    });
    req.on('error', reject);
    req.end(data);
  });
}

async function httpClient() {
  const data = fs.readFileSync(file);
  const n = Number(countArg);
  const want = sha(data);
  let good = 0;
  // keep-alive: several requests over the agent's few connections, concurrently
  const keep = new http.Agent({keepAlive: true, maxSockets: 2});
  const rs = await Promise.all(Array.from({length: n}, () => post(keep, data)));
  for (const [st, body] of rs) if (st === 200 && sha(body) === want) good++;
  keep.destroy();
  // Connection: close: one connection per request, one after the other
  const close = new http.Agent({keepAlive: false});
  for (let i = 0; i < n; i++) {
    const [st, body, conn] = await post(close, data);
    if (st === 200 && sha(body) === want && conn === 'close') good++;
  }
  console.log(`http ${good}/${2 * n} echoes of ${data.length} bytes intact`);
  return good === 2 * n;
}

function echoServer() {
  net.createServer((c) => c.pipe(c)).listen(port, '127.0.0.1');
}

function echoOne(data) {
  return new Promise((resolve, reject) => {
    const parts = [];
    const c = net.connect(port, '127.0.0.1', () => {
      // one large write, then a few more through writev (cork)
      c.write(data.subarray(0, data.length >> 1));
      c.cork();
      for (let off = data.length >> 1; off < data.length; off += 100000)
        c.write(data.subarray(off, Math.min(off + 100000, data.length)));
      c.uncork();
      c.end();
    });
    c.on('data', (b) => parts.push(b));
    c.on('end', () => resolve(sha(Buffer.concat(parts))));
    c.on('error', reject);
  });
}

async function echoClient() {
  const data = fs.readFileSync(file);
  const n = Number(countArg);
  const want = sha(data);
  const got = await Promise.all(Array.from({length: n}, () => echoOne(data)));
  const good = got.filter((g) => g === want).length;
  console.log(`net ${good}/${n} echoes of ${data.length} bytes intact`);
  return good === n;
}

if (mode === 'servers') {
  httpServer();
  port = Number(echoPort);
  echoServer();
} else {
  (async () => {
    let ok = await httpClient();
    port = Number(echoPort);
    ok = (await echoClient()) && ok;
    process.exit(ok ? 0 : 1);
  })().catch((e) => { console.error(e); process.exit(2); });
}
