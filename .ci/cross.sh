#!/usr/bin/env bash
# Build `longhand` for another target and run it there: `--version`, a
# `tool call` of every built-in tool (fs, json, and http against a loopback
# server), and the offline code-audit example to its end. Foreign
# architectures run under Debian's qemu-user-static.
#
#   .ci/cross.sh TARGET [--minimal]
#
# TARGET is one of:
#   x86_64-unknown-linux-musl       static; also run in an empty chroot (root only)
#   aarch64-unknown-linux-musl      static; under qemu-aarch64-static
#   armv7-unknown-linux-gnueabihf   32-bit ARM: no Cranelift backend, so every
#                                   component runs on wasmtime's Pulley
#                                   interpreter; under qemu-arm-static
#   armv7-unknown-linux-musleabihf  the same, static (needs rust-std for it)
# --minimal builds with --no-default-features (tool host and SQLite store).
#
# It installs what it needs (Debian packages, the rustup target), builds
# `--release --bin longhand` once, and prints the binary's size and how
# long each step took. Set CROSS_SKIP_INSTALL=1 to skip the installs.
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:?usage: .ci/cross.sh TARGET [--minimal]}
features=()
if [[ "${2:-}" == "--minimal" ]]; then
    features=(--no-default-features)
fi

packages=()
runner=()
case "$target" in
    x86_64-unknown-linux-musl)
        packages=(musl-tools file) ;;
    aarch64-unknown-linux-musl)
        packages=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static file)
        runner=(qemu-aarch64-static) ;;
    armv7-unknown-linux-musleabihf)
        packages=(gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user-static file)
        runner=(qemu-arm-static) ;;
    armv7-unknown-linux-gnueabihf)
        # Dynamically linked against Debian's armhf glibc (the cross
        # package's copy). Not `qemu-arm-static -L`: that maps "/" itself
        # to the sysroot, and a grant's directory walk from "/" would look
        # for /tmp there. The loader is linked into /lib instead (below).
        packages=(gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user-static file)
        runner=(qemu-arm-static -E LD_LIBRARY_PATH=/usr/arm-linux-gnueabihf/lib) ;;
    *)
        echo "cross.sh: unknown target $target (see the list at the top of this script)" >&2
        exit 2 ;;
esac

step_start=$SECONDS
step() {
    echo "== [$((SECONDS - step_start)) s] $*"
}

if [[ "${CROSS_SKIP_INSTALL:-}" != 1 ]]; then
    step "install: ${packages[*]} and the rustup target"
    missing=()
    for p in "${packages[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if ((${#missing[@]})); then
        sudo=()
        [[ $(id -u) == 0 ]] || sudo=(sudo)
        "${sudo[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    rustup target add wasm32-wasip2 "$target"
fi

if [[ "$target" == armv7-unknown-linux-gnueabihf && ! -e /lib/ld-linux-armhf.so.3 ]]; then
    step "link the armhf loader into /lib (it runs the binary under qemu-arm-static)"
    sudo=()
    [[ $(id -u) == 0 ]] || sudo=(sudo)
    "${sudo[@]}" ln -s /usr/arm-linux-gnueabihf/lib/ld-linux-armhf.so.3 /lib/ld-linux-armhf.so.3
fi

step "cargo build --release --target $target --bin longhand ${features[*]}"
build_start=$SECONDS
cargo build --release --locked --target "$target" --bin longhand "${features[@]}"
echo "build took $((SECONDS - build_start)) s"

target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin="$target_dir/$target/release/longhand"
file "$bin"
size=$(stat -c %s "$bin")
echo "binary: $bin, $size bytes ($(python3 -c "print(f'{$size / 1048576:.1f}')") MiB)"

work=$(mktemp -d)
trap 'kill "${server_pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
export LONGHAND_HOME="$work/home"
run() {
    "${runner[@]}" "$bin" "$@"
}

step "--version"
run --version

step "tool call fs (write, read) in a read-write grant"
mkdir -p "$work/files"
run tool call fs write --dir "$work/files:/workspace:rw" \
    --input '{"path": "notes.md", "content": "hello from '"$target"'\n"}'
run tool call fs read --dir "$work/files:/workspace:ro" --input '{"path": "notes.md"}' | tee "$work/read.json"
grep -q "hello from $target" "$work/read.json"

step "tool call json query"
run tool call json query --input '{"filter": ".a | keys", "input": {"a": {"x": 1, "y": 2}}}' | tee "$work/json.json"
grep -q '"x"' "$work/json.json"

step "tool call http get, against a loopback server granted by --allow-host"
mkdir -p "$work/site" && echo "served over loopback" >"$work/site/index.html"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/site" >/dev/null 2>&1 &
server_pid=$!
for _ in $(seq 50); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
    sleep 0.1
done
run tool call http get --allow-host "127.0.0.1:$port" \
    --input '{"url": "http://127.0.0.1:'"$port"'/index.html"}' | tee "$work/http.json"
grep -q "served over loopback" "$work/http.json"

step "run examples/code-audit (offline: the model's answers from its cassette)"
example="$work/code-audit"
cp -r examples/code-audit "$example"
rm -rf "$example/out"
run run "$example" | tee "$work/run.out"
grep -q "^finished:" "$work/run.out"
ls "$example"/out/*/report.md

if [[ "$target" == x86_64-unknown-linux-musl && $(id -u) == 0 ]]; then
    step "the static binary in an empty root: no libc, no loader beside it"
    root="$work/root"
    mkdir -p "$root/bin" "$root/tmp" "$root/home"
    cp "$bin" "$root/bin/longhand"
    cp -r examples/code-audit "$root/code-audit"
    rm -rf "$root/code-audit/out"
    ! ls "$root"/lib* >/dev/null 2>&1
    chroot "$root" /bin/longhand --version
    LONGHAND_HOME=/home chroot "$root" /bin/longhand run /code-audit | tee "$work/chroot.out"
    grep -q "^finished:" "$work/chroot.out"
    ls "$root"/code-audit/out/*/report.md
fi

step "done: $target"
