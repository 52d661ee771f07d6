#!/usr/bin/env bash
# Builds the release artifacts of garage for x86_64 Linux:
#
#   target/release-artifacts/garage-<version>-x86_64-unknown-linux-musl
#       the `garage` binary, statically linked against musl (runs on any
#       x86_64 Linux, no libc needed), built with the `dist` profile of the
#       root Cargo.toml (fat LTO, one codegen unit, no debug info, stripped,
#       unwinding panics; see the profile's comment for its opt-levels)
#   target/release-artifacts/garage-<version>-x86_64-unknown-linux-musl.sha256
#       its SHA-256, in `sha256sum` format (check with `sha256sum -c FILE`
#       in that folder)
#   target/release-artifacts/garage.toml
#       the container image's configuration (a copy of script/docker/garage.toml),
#       so that the folder is the build context of script/docker/Dockerfile.release
#
# It checks that the binary is statically linked and at most 25 MB
# (25000000 bytes), and fails otherwise.
#
# Run from anywhere in the repository, as root or with sudo (it installs
# musl-tools, the C compiler for the bundled LMDB and SQLite, when missing,
# and the Rust musl target with rustup when missing):
#
#   script/release.sh
#
# Set CARGO_TARGET_DIR to build elsewhere than target/ (the artifacts still go
# to target/release-artifacts). A fat-LTO build of the whole stack takes a
# while: 7 to 15 minutes on 2 cores from scratch.
#
# The container image from the artifact:
#
#   docker build -f script/docker/Dockerfile.release \
#     --build-arg VERSION=<version> -t garage:<version> target/release-artifacts
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=x86_64-unknown-linux-musl
PROFILE=dist
MAX_BYTES=25000000
OUT_DIR=target/release-artifacts

log() { echo "== $*"; }
die() { echo "error: $*" >&2; exit 1; }

SUDO=
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 \
    || die "no Rust toolchain (cargo) found; install one with rustup (Rust 1.85 or newer)"

# The C code bundled by the dependencies (LMDB, SQLite) is compiled for musl
# with musl-gcc; `file` does the static-linking check below.
missing=()
command -v musl-gcc >/dev/null 2>&1 || missing+=(musl-tools)
command -v file >/dev/null 2>&1 || missing+=(file)
command -v make >/dev/null 2>&1 || missing+=(make)
if [ ${#missing[@]} -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 \
        || die "missing ${missing[*]} and no apt-get to install them: install them by hand"
    log "installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
    command -v rustup >/dev/null 2>&1 \
        || die "the Rust target $TARGET is missing and there is no rustup to add it"
    log "rustup target add $TARGET"
    rustup target add "$TARGET"
fi

# No OpenSSL: nothing may link a system TLS library into a static binary.
if grep -qE '^name = "(openssl-sys|native-tls)"' Cargo.lock; then
    die "Cargo.lock has openssl-sys or native-tls: the static musl build needs pure-Rust TLS"
fi

export CC_x86_64_unknown_linux_musl="${CC_x86_64_unknown_linux_musl:-musl-gcc}"
export AR_x86_64_unknown_linux_musl="${AR_x86_64_unknown_linux_musl:-ar}"
export CARGO_INCREMENTAL=0

log "cargo build --locked --profile $PROFILE --target $TARGET -p garage --bin garage"
start=$(date +%s)
cargo build --locked --profile "$PROFILE" --target "$TARGET" -p garage --bin garage
end=$(date +%s)
log "built in $((end - start)) s"

target_dir="${CARGO_TARGET_DIR:-target}"
bin="$target_dir/$TARGET/$PROFILE/garage"
[ -x "$bin" ] || die "no binary at $bin"

# `garage -V` prints "garage <version>" (the workspace version).
version=$("$bin" -V | head -n1 | awk '{print $2}')
[ -n "$version" ] || die "could not read the version from '$bin -V'"

mkdir -p "$OUT_DIR"
name="garage-$version-$TARGET"
cp "$bin" "$OUT_DIR/$name"
chmod 0755 "$OUT_DIR/$name"
cp script/docker/garage.toml "$OUT_DIR/garage.toml"
(cd "$OUT_DIR" && sha256sum "$name" > "$name.sha256")

desc=$(file -b "$OUT_DIR/$name")
echo "$desc"
case "$desc" in
    *"statically linked"* | *"static-pie linked"*) ;;
    *) die "$OUT_DIR/$name is not statically linked: $desc" ;;
esac
if ldd "$OUT_DIR/$name" >/dev/null 2>&1 \
    && ! ldd "$OUT_DIR/$name" 2>&1 | grep -qE 'not a dynamic executable|statically linked'; then
    ldd "$OUT_DIR/$name" >&2 || true
    die "$OUT_DIR/$name links shared libraries"
fi

size=$(stat -c %s "$OUT_DIR/$name")
if [ "$size" -gt "$MAX_BYTES" ]; then
    die "$OUT_DIR/$name is $size bytes, over the limit of $MAX_BYTES bytes (25 MB)"
fi

log "artifacts"
printf '%s\t%s bytes (%s MiB)\n' "$OUT_DIR/$name" "$size" \
    "$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1048576 }')"
cat "$OUT_DIR/$name.sha256"
echo "container image: docker build -f script/docker/Dockerfile.release --build-arg VERSION=$version -t garage:$version $OUT_DIR"
