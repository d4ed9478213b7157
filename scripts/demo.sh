#!/usr/bin/env bash
# Builds arca and runs the main job on a local example: init a repository, back up a folder,
# back it up again (incremental), restore it, verify the restore and check the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p arca-cli
arca="$PWD/target/release/arca"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export ARCA_PASSWORD="demo password"
export ARCA_REPOSITORY="$work/repo"

# The example folder: this repository's sources and docs.
src="$work/example"
mkdir -p "$src"
cp -a crates docs README.md "$src/"

"$arca" init
"$arca" backup "$src"
echo "--- a second backup of the unchanged folder only stores what changed:"
"$arca" backup "$src"
"$arca" snapshots
"$arca" restore latest --target "$work/restore"
diff -r "$src" "$work/restore$src"
echo "--- restored tree is identical to the source"
"$arca" check --read-data
