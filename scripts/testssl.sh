#!/usr/bin/env bash
# testssl.sh (Debian's package, installed here if missing) against a release
# build serving HTTPS on 127.0.0.1 with a certificate from a throw-away test
# CA (P-256, valid 365 days; the CA is handed to testssl with --add-ca, so
# that trust and expiry findings are the server's, not the test's).
# Prints testssl's report to target/testssl/report.txt and its summary
# lines here (the JSON findings in report.json); exits 1 if any finding is rated HIGH or CRITICAL, or if the
# server's cipher order is not used. About 90 s; not part of CI (it is a
# scan, not a test of behaviour; tests/server/exposure.rs checks the order).
#
# Usage: scripts/testssl.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v testssl >/dev/null || { apt-get update -qq && apt-get install -y -qq testssl.sh; }
command -v openssl >/dev/null || apt-get install -y -qq openssl
cargo build --release -p httplite -q
OUT=target/testssl
rm -rf "$OUT" && mkdir -p "$OUT/www"
PORT=$((20000 + RANDOM % 20000))
echo '<p>testssl</p>' > "$OUT/www/index.html"
(
    cd "$OUT"
    openssl ecparam -name prime256v1 -genkey -noout -out ca.key
    openssl req -x509 -new -key ca.key -days 3650 -subj "/CN=httplite test CA" -out ca.pem
    openssl ecparam -name prime256v1 -genkey -noout -out server.sec1
    openssl pkcs8 -topk8 -nocrypt -in server.sec1 -out server.key
    openssl req -new -key server.key -subj "/CN=localhost" -out server.csr
    # A revocation list the server itself publishes (testssl rates a
    # certificate without a CRL or OCSP URI HIGH): an empty CRL of the
    # test CA, at the URI the certificate names (testssl does not fetch it:
    # that would need --phone-out).
    printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" \
        "keyUsage=digitalSignature" "extendedKeyUsage=serverAuth" \
        "crlDistributionPoints=URI:http://127.0.0.1:$PORT/ca.crl" > ext.cnf
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
        -extfile ext.cnf -out server.pem
    : > index.txt
    echo 01 > crlnumber
    printf '%s\n' "[ca]" "default_ca=test" "[test]" "database=index.txt" \
        "crlnumber=crlnumber" "default_md=sha256" "default_crl_days=30" > ca.cnf
    openssl ca -config ca.cnf -gencrl -keyfile ca.key -cert ca.pem -out www/ca.crl.pem
    openssl crl -in www/ca.crl.pem -outform DER -out www/ca.crl
) 2>/dev/null
target/release/httplite --root "$OUT/www" --bind "127.0.0.1:$PORT" --workers 1 --quiet \
    --tls-cert "$OUT/server.pem" --tls-key "$OUT/server.key" &
PID=$!
trap 'kill "$PID" 2>/dev/null || true' EXIT
sleep 1
timeout 600 testssl --color 0 --warnings off --add-ca "$OUT/ca.pem" --ip one \
    --jsonfile "$OUT/report.json" "127.0.0.1:$PORT" > "$OUT/report.txt" 2>&1 || true
grep -E "offered|not vulnerable|Has server cipher order|Negotiated|NOT ok|HIGH|CRITICAL" \
    "$OUT/report.txt" | grep -vE "^ +x[0-9a-f]{4} " || true
# The ratings are in the JSON findings (the text report says "NOT ok").
python3 - "$OUT/report.json" <<'PY'
import collections, json, sys
findings = json.load(open(sys.argv[1]))
by = collections.Counter(f.get("severity", "?") for f in findings)
print("testssl.sh: findings by rating:", dict(sorted(by.items())))
bad = [f for f in findings if f.get("severity") in ("HIGH", "CRITICAL")]
for f in bad:
    print(f"  {f['severity']}: {f['id']}: {f['finding']}")
sys.exit(1 if bad else 0)
PY
if ! grep -q "Has server cipher order? *yes" "$OUT/report.txt"; then
    echo "testssl.sh: the server's cipher order is not used (see $OUT/report.txt)" >&2
    exit 1
fi
echo "testssl.sh: no finding rated HIGH or CRITICAL; the server's cipher order is used"
