#!/usr/bin/env bash
# Generates gRPC client code for runhook in Go, Python and Java, as a consumer of
# the API would, for the interop test (test/interop) and as a worked example.
#
#   scripts/generate-clients.sh            # all three languages
#   scripts/generate-clients.sh go python  # only these
#   npm run generate:clients [-- go|python|java]
#
# Tools are pinned and installed once under the cache directory
# ${RUNHOOK_CACHE_DIR:-$HOME/.cache/runhook}:
#   bin/protoc-gen-go, bin/protoc-gen-go-grpc   built from the Go module proxy
#   venv-grpcio-tools-<version>/                python venv with grpcio-tools
#   interop-java/runhook-interop-java-<hash>.jar the Java client (test/interop/java, built by
#                                                Maven, which fetches protoc and the grpc-java
#                                                plugin as artifacts into ~/.m2); <hash> covers
#                                                proto/runhook, the pom and the sources, so an
#                                                unchanged client is never rebuilt
#
# Outputs (git-ignored):
#   test/interop/go/gen/runhook/v1/*.pb.go         (buf.gen.clients.yaml, managed go_package)
#   test/interop/python/gen/runhook/v1/*_pb2*.py   (python -m grpc_tools.protoc)
#   test/interop/python/gen/PYTHON                 path of the venv interpreter that has
#                                                  grpcio + protobuf, to run the client with
#   test/interop/java/target/JAR                   path of the cached Java client jar
set -euo pipefail

PROTOC_GEN_GO_VERSION="v1.36.6"      # google.golang.org/protobuf
PROTOC_GEN_GO_GRPC_VERSION="v1.5.1"  # google.golang.org/grpc/cmd/protoc-gen-go-grpc
GRPCIO_TOOLS_VERSION="1.85.1"        # grpcio-tools (bundles protoc)
GRPCIO_VERSION="1.85.1"              # grpcio runtime, same release as grpcio-tools
PROTOBUF_PY_VERSION="7.36.2"         # protobuf runtime for the generated Python code

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${RUNHOOK_CACHE_DIR:-$HOME/.cache/runhook}"
BIN_DIR="$CACHE_DIR/bin"
VENV_DIR="$CACHE_DIR/venv-grpcio-tools-$GRPCIO_TOOLS_VERSION"

log() { printf '[generate-clients] %s\n' "$*" >&2; }
die() { printf '[generate-clients] error: %s\n' "$*" >&2; exit 1; }

want_go=0
want_python=0
want_java=0
if [ "$#" -eq 0 ]; then
  want_go=1
  want_python=1
  want_java=1
fi
for arg in "$@"; do
  case "$arg" in
    go) want_go=1 ;;
    python) want_python=1 ;;
    java) want_java=1 ;;
    *) die "unknown argument '$arg' (expected: go, python, java)" ;;
  esac
done

BUF="$ROOT/node_modules/.bin/buf"
PROTO_FILES=()
while IFS= read -r f; do PROTO_FILES+=("$f"); done < <(cd "$ROOT/proto" && find runhook -name '*.proto' | LC_ALL=C sort)
[ "${#PROTO_FILES[@]}" -gt 0 ] || die "no runhook protos found under $ROOT/proto"

# --- Go ----------------------------------------------------------------------

# go_tool NAME VERSION_LINE MODULE@VERSION PACKAGE
# Builds PACKAGE at the pinned version into $BIN_DIR/NAME unless
# `$BIN_DIR/NAME --version` already prints VERSION_LINE. Uses a throwaway module
# (`go get` + `go build`) instead of `go install pkg@version`, which needs module
# list look-ups that some proxies refuse.
go_tool() {
  local name="$1" version_line="$2" module_at_version="$3" package="$4"
  local dest="$BIN_DIR/$name"
  if [ -x "$dest" ] && [ "$("$dest" --version 2>/dev/null || true)" = "$version_line" ]; then
    return
  fi
  log "building $name ($module_at_version)"
  local tmp
  tmp="$(mktemp -d)"
  (
    cd "$tmp"
    export GOFLAGS=-mod=mod
    go mod init runhook.local/toolbuild >/dev/null 2>&1
    go get "$module_at_version" "google.golang.org/protobuf@$PROTOC_GEN_GO_VERSION" >&2
    go build -o "$dest.tmp" "$package"
  ) || { rm -rf "$tmp"; die "could not build $name"; }
  rm -rf "$tmp"
  mv -f "$dest.tmp" "$dest"
  [ "$("$dest" --version)" = "$version_line" ] || die "$name reports '$("$dest" --version)', expected '$version_line'"
}

generate_go() {
  command -v go >/dev/null 2>&1 || die "'go' not found on PATH (needed for the Go client; run with 'python' to skip Go)"
  mkdir -p "$BIN_DIR"
  go_tool protoc-gen-go "protoc-gen-go $PROTOC_GEN_GO_VERSION" \
    "google.golang.org/protobuf@$PROTOC_GEN_GO_VERSION" google.golang.org/protobuf/cmd/protoc-gen-go
  go_tool protoc-gen-go-grpc "protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}" \
    "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION" google.golang.org/grpc/cmd/protoc-gen-go-grpc
  log "generating Go into test/interop/go/gen"
  (cd "$ROOT" && PATH="$BIN_DIR:$PATH" "$BUF" generate --template buf.gen.clients.yaml)
}

# --- Python --------------------------------------------------------------------

generate_python() {
  command -v python3 >/dev/null 2>&1 || die "'python3' not found on PATH (needed for the Python client; run with 'go' to skip Python)"
  local marker="$VENV_DIR/.runhook-installed"
  local wanted="grpcio-tools==$GRPCIO_TOOLS_VERSION grpcio==$GRPCIO_VERSION protobuf==$PROTOBUF_PY_VERSION"
  if [ ! -f "$marker" ] || [ "$(cat "$marker")" != "$wanted" ]; then
    log "creating $VENV_DIR ($wanted)"
    rm -rf "$VENV_DIR"
    python3 -m venv "$VENV_DIR" || die "python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
    # shellcheck disable=SC2086
    "$VENV_DIR/bin/python" -m pip install --quiet --disable-pip-version-check $wanted >&2
    printf '%s' "$wanted" >"$marker"
  fi
  local py="$VENV_DIR/bin/python"
  local out="$ROOT/test/interop/python/gen"
  log "generating Python into test/interop/python/gen"
  rm -rf "$out"
  mkdir -p "$out"
  # Run as __main__ so grpc_tools adds its bundled google/protobuf/*.proto to the include path.
  (cd "$ROOT/proto" && "$py" -m grpc_tools.protoc -I . \
    --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" "${PROTO_FILES[@]}")
  printf '%s\n' "$py" >"$out/PYTHON"
}

# --- Java ----------------------------------------------------------------------

generate_java() {
  command -v java >/dev/null 2>&1 || die "'java' not found on PATH (needed for the Java client)"
  command -v mvn >/dev/null 2>&1 || die "'mvn' not found on PATH (needed for the Java client)"
  local project="$ROOT/test/interop/java" hash jar
  hash="$(cd "$ROOT" && { printf '%s\n' "${PROTO_FILES[@]}"; find test/interop/java/pom.xml test/interop/java/src -type f | LC_ALL=C sort; } |
    sed 's|^runhook/|proto/runhook/|' | while IFS= read -r f; do printf '%s\n' "$f"; sha256sum <"$f"; done | sha256sum | cut -c1-16)"
  jar="$CACHE_DIR/interop-java/runhook-interop-java-$hash.jar"
  if [ ! -f "$jar" ]; then
    log "building the Java client with Maven (first run fetches protoc, grpc-java and their dependencies)"
    (cd "$project" && mvn -B -q -Dstyle.color=never package >&2) || die "mvn package failed in test/interop/java"
    mkdir -p "$CACHE_DIR/interop-java"
    find "$CACHE_DIR/interop-java" -name 'runhook-interop-java-*.jar' -delete # older versions
    cp "$project/target/runhook-interop-java.jar" "$jar.tmp.$$"
    mv -f "$jar.tmp.$$" "$jar"
  else
    log "Java client unchanged: $jar"
  fi
  mkdir -p "$project/target"
  printf '%s\n' "$jar" >"$project/target/JAR"
}

[ -x "$BUF" ] || die "$BUF not found: run 'npm ci' first"
if [ "$want_go" -eq 1 ]; then generate_go; fi
if [ "$want_python" -eq 1 ]; then generate_python; fi
if [ "$want_java" -eq 1 ]; then generate_java; fi
log "done"
