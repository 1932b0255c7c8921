#!/usr/bin/env node
// llhttp judge of the differential conformance test (scripts/conformance.sh).
//
// Reads stdin, one hex-encoded request head per line; feeds each to a fresh
// instance of Node's own HTTP parser (llhttp, the binding `http.Server`
// uses), initialised exactly as `http.Server` does by default: strict
// (kLenientNone, no --insecure-http-parser), default max header size.
// Prints one line per head:
//   accept <METHOD> <target as hex> <major.minor>
//   reject <llhttp error code>      (e.g. reject HPE_INVALID_METHOD), also
//                                   for an error right after the head
//                                   (before the message is complete)
//   incomplete                      (no complete head, no error)
// On top of the parser it applies the one check `http.Server` itself makes
// before a handler runs: `requireHostHeader` (default true) answers 400 to an
// HTTP/1.1 request (exactly 1.1) with no Host header ("reject NODE_NO_HOST").
'use strict';

process.noDeprecation = true; // process.binding is deprecated, still works

const { HTTPParser, methods } = process.binding('http_parser');

const kOnHeaders = HTTPParser.kOnHeaders | 0;
const kOnHeadersComplete = HTTPParser.kOnHeadersComplete | 0;
const kOnMessageComplete = HTTPParser.kOnMessageComplete | 0;
const kLenientNone = HTTPParser.kLenientNone | 0;

function judge(head) {
  const parser = new HTTPParser();
  parser.initialize(HTTPParser.REQUEST, {}, 0, kLenientNone);
  let headers = [];
  let url = '';
  let verdict = null;
  let complete = false;
  parser[kOnHeaders] = (h, u) => {
    headers.push(...h);
    url += u;
  };
  parser[kOnHeadersComplete] = (major, minor, h, method, u) => {
    if (h === undefined) h = headers;
    if (u === undefined) u = url;
    // Node keeps the first Host (req.headers.host), so only absence matters.
    let host = false;
    for (let i = 0; i < h.length; i += 2) {
      if (h[i].toLowerCase() === 'host') host = true;
    }
    if (major === 1 && minor === 1 && !host) {
      verdict = 'reject NODE_NO_HOST';
    } else {
      verdict = `accept ${methods[method]} ${Buffer.from(u, 'latin1').toString('hex')} ${major}.${minor}`;
    }
    return 0;
  };
  parser[kOnMessageComplete] = () => {
    complete = true;
  };
  const ret = parser.execute(head);
  parser.close();
  // An error before the message is complete rejects the head, even if it
  // came right after the head was parsed (e.g. Transfer-Encoding: gzip on a
  // request: http.Server would run the handler, then abort the connection).
  // An error after it is about the bytes that follow, not this head.
  if (ret instanceof Error && !complete) return `reject ${ret.code || 'ERROR'}`;
  return verdict || 'incomplete';
}

const chunks = [];
process.stdin.on('data', (c) => chunks.push(c));
process.stdin.on('end', () => {
  const out = [];
  const lines = Buffer.concat(chunks).toString('latin1').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  for (const raw of lines) {
    const line = raw.trim();
    if (!/^([0-9a-fA-F]{2})*$/.test(line)) {
      out.push('bad-input');
      continue;
    }
    out.push(judge(Buffer.from(line, 'hex')));
  }
  process.stdout.write(out.map((v) => v + '\n').join(''));
});
