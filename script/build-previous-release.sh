#!/usr/bin/env bash
# Builds the previous release's `garage` binary from this repository's own
# history, for the mixed-version test (src/garage/tests/e2e/upgrade.rs) and
# for trying an upgrade by hand. Prints the binary's path.
#
#   script/build-previous-release.sh
#
# The release's commit is named in CHANGELOG.md (a clone may lack tags).
# Its sources are extracted with `git archive` under
# target/previous-release/, and built in the test profile with the same
# target directory as the workspace (CARGO_TARGET_DIR, default target/):
# dependencies already built for this workspace are reused, only the garage
# crates compile again. The binary is copied to
# target/previous-release/garage-v$VERSION; nothing is built when it is
# there already.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

VERSION=0.2.0
COMMIT=827c8533a967f725952673998f5e829f32b312c0
DIR=$ROOT/target/previous-release
OUT=$DIR/garage-v$VERSION

if [ -x "$OUT" ] && "$OUT" --version 2>/dev/null | grep -q "^garage $VERSION"; then
    echo "$OUT"
    exit 0
fi
if ! git cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
    echo "error: this clone lacks commit $COMMIT (release v$VERSION); a shallow clone? run \`git fetch --unshallow\` and try again" >&2
    exit 1
fi
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
echo "== building garage v$VERSION (commit ${COMMIT:0:12}) from the repository's history" >&2
SRC=$DIR/src-v$VERSION
rm -rf "$SRC"
mkdir -p "$SRC"
git archive "$COMMIT" | tar -x -C "$SRC"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
(cd "$SRC" && CARGO_TARGET_DIR="$TARGET" cargo build --locked -p garage --bin garage >&2)
cp "$TARGET/debug/garage" "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
# The shared target directory's garage binary is now v$VERSION's: remove it
# so that the next build of the workspace puts its own back.
rm -f "$TARGET/debug/garage"
"$OUT" --version | head -1 >&2
echo "$OUT"
