# Builds llama.cpp's `llama-server` alone, linked against llama.cpp's
# libraries prebuilt (libllama, libggml*, libmtmd from the wheel of
# `llama-cpp-py-sync`), so that ggml and libllama - most of a full build's
# 200-odd steps - are never compiled. scripts/local-model.sh runs it:
#
#   make -f scripts/llama-server.mk SRC=<llama.cpp tree> LIBS=<dir of the .so files> \
#        OUT=<build dir> BUILD_NUMBER=11349 -j2
#
# SRC's headers must match LIBS's exports (the script takes the source of
# llama.cpp b11349, three builds before the libraries' b11352, whose C API
# is the same). What it compiles: common/ (with its chat parsers and jinja
# engine), the vendored cpp-httplib, tools/server, and two generated files:
# build-info.cpp and an empty web-UI table (the sdist has no built UI; pod
# is the client here, so `/` answers 404).

SRC ?= $(error SRC: the llama.cpp source tree)
LIBS ?= $(error LIBS: the directory of the prebuilt libllama.so and kin)
OUT ?= build
BUILD_NUMBER ?= 0
BUILD_COMMIT ?= unknown
# -O0: the model runs in the prebuilt libraries, which are optimised; what
# is compiled here is the HTTP server, JSON and the chat-template engine,
# and -O0 compiles them fastest (#42's runs used such a build).
OPT ?= -O0
SHIM ?=

CXX ?= g++
CXXFLAGS := -std=c++17 $(OPT) -g0 -pthread -w -DNDEBUG -DLLAMA_SUBPROCESS \
	-I$(SRC)/include -I$(SRC)/ggml/include -I$(SRC)/common -I$(SRC)/vendor \
	-I$(SRC)/tools/mtmd -I$(SRC)/tools/server -I$(SRC) -I$(OUT)/gen
HTTPLIB_DEFS := -DCPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH=1048576 \
	-DCPPHTTPLIB_LISTEN_BACKLOG=512 -DCPPHTTPLIB_REQUEST_URI_MAX_LENGTH=32768 \
	-DCPPHTTPLIB_TCP_NODELAY=1

COMMON := arg chat-auto-parser-generator chat-auto-parser-helpers chat-diff-analyzer \
	chat-peg-parser chat common console debug download fit hf-cache imatrix-loader \
	json-schema-to-grammar json-schema json llguidance log ngram-cache ngram-map ngram-mod \
	peg-parser preset reasoning-budget sampling speculative subproc trie unicode
SOURCES := $(addprefix common/,$(addsuffix .cpp,$(COMMON))) \
	$(patsubst $(SRC)/%,%,$(wildcard $(SRC)/common/parsers/*.cpp)) \
	$(patsubst $(SRC)/%,%,$(wildcard $(SRC)/common/jinja/*.cpp)) \
	$(patsubst $(SRC)/%,%,$(wildcard $(SRC)/tools/server/*.cpp)) \
	vendor/cpp-httplib/httplib.cpp
OBJECTS := $(addprefix $(OUT)/obj/,$(SOURCES:.cpp=.o)) $(OUT)/obj/gen/build-info.o $(OUT)/obj/gen/ui.o

# SHIM: a library to link in as well (scripts/glibc-compat.py's libisoc23.so
# on a glibc older than 2.38), so that the binary runs without LD_PRELOAD.
# libmtmd.so names itself libmtmd.so.0, a file the wheel does not have: a
# link by that name in OUT/lib, which the binary searches after LIBS.
$(OUT)/llama-server: $(OBJECTS)
	@mkdir -p $(OUT)/lib
	ln -sf $(abspath $(LIBS))/libmtmd.so $(OUT)/lib/libmtmd.so.0
	$(CXX) -pthread -o $@ $^ -L$(LIBS) -l:libmtmd.so -l:libllama.so.0 -l:libggml.so.0 \
		-l:libggml-base.so.0 -Wl,-rpath,$(abspath $(LIBS)):$(abspath $(OUT))/lib \
		-Wl,--allow-shlib-undefined -Wl,--no-as-needed $(SHIM)

$(OUT)/obj/vendor/cpp-httplib/httplib.o: $(SRC)/vendor/cpp-httplib/httplib.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(HTTPLIB_DEFS) -c -o $@ $<

$(OUT)/obj/%.o: $(SRC)/%.cpp $(OUT)/gen/ui.h
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c -o $@ $<

$(OUT)/obj/gen/%.o: $(OUT)/gen/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c -o $@ $<

$(OUT)/gen/build-info.cpp: $(SRC)/common/build-info.cpp.in
	@mkdir -p $(dir $@)
	sed -e 's/@LLAMA_BUILD_NUMBER@/$(BUILD_NUMBER)/' -e 's/@LLAMA_BUILD_COMMIT@/$(BUILD_COMMIT)/' \
		-e 's/@BUILD_COMPILER@/$(CXX)/' -e 's/@BUILD_TARGET@/$(shell $(CXX) -dumpmachine)/' $< >$@

# The web-UI table with no assets, as scripts/ui-assets.cmake writes it
# when no built UI is found.
$(OUT)/gen/ui.h: $(SRC)/tools/ui/ui.h.in
	@mkdir -p $(dir $@)
	sed -e 's/^#cmakedefine LLAMA_UI_HAS_ASSETS 1$$//' -e 's/@N_ASSETS@/0/' $< >$@

$(OUT)/gen/ui.cpp: $(SRC)/tools/ui/ui.cpp.in $(OUT)/gen/ui.h
	sed -e 's/@ASSET_ARRAYS@//' -e 's/@ASSET_TABLE@//' -e 's/@N_ASSETS@/0/' -e 's/@USE_GZIP@/false/' $< >$@

.PHONY: clean
clean:
	rm -rf $(OUT)/obj $(OUT)/gen $(OUT)/llama-server
