# Ternion build. Plain GNU make; everything lands in $(B)/ (build/ by default,
# build-asan/ for `make asan`). Layout:
#   format/*.c         -> $(B)/libtfmt.a     weight codecs (plain C; in everything below)
#   dsl/*.c            -> $(B)/libtdsl.a     typed shader builder (GLSL 450 + shaderc); its op
#                                            builders dsl/dsl_ops.h are written from its op table
#                                            dsl/dsl_ops.def (tools/dsl_ops_h.sh)
#   runtime/*/*.c      -> $(B)/libtrt.a      GGUF, Vulkan runtime, tokenizer, engine, sampler,
#                                            the public API (runtime/api); not the CLI
#   libtrt + generated/X/model.c + the model registry
#                      -> $(B)/libternion.a, $(B)/libternion.so (+ ternion.pc at install)
#                                            the public library (runtime/api/ternion.h); only
#                                            ternion_* is exported (-fvisibility=hidden)
#   runtime/cli/*.c    -> $(B)/ternion       the CLI, on ternion.h only; the generated model is
#                                            chosen from the GGUF's metadata
#                      -> $(B)/X             the same CLI with model X pinned, one per model
#   gen/*.c (not main) -> $(B)/libtgen.a     YAML model reader, passes, kernel builders
#   gen/main.c         -> $(B)/ternion-gen   `make gen`: models/X.yaml -> generated/X/; and
#                                            --from-gguf FILE: a models/X.yaml drafted from a GGUF
#   generated/X/kernels/*.comp -> $(B)/spv/X/ SPIR-V (glslc), embedded in generated/X/model.o
#   tests/test_*.c     -> $(B)/tests/test_*  cmocka suites (tests/ref/*.c: CPU reference)
#   server/*.c         -> $(B)/ternion-server  the OpenAI-compatible HTTP server (libmicrohttpd +
#                                            cJSON), on ternion.h only; its request, JSON,
#                                            scheduler and HTTP parts also as $(B)/libtsrv.a (tests)
#   tools/*.c          -> $(B)/tools/*       helpers (random-weight model writer, ...)
#   examples/*.c       -> $(B)/examples/*    (simple, batched: on ternion.h only)
# Useful targets: all (default), gen, test, asan, bench, run, fuzz, examples,
# install (PREFIX=/usr/local, DESTDIR), clean.

B        ?= build
CC       ?= cc
OPT      ?= -O2
CFLAGS_BASE = -std=c11 -g $(OPT) -Wall -Wextra -Werror -Wno-unused-parameter \
              -Wshadow -Wvla -Wno-format-truncation -D_DEFAULT_SOURCE -fno-strict-aliasing -I. -Idsl -Igen -Iruntime
SAN      ?=
CFLAGS   += $(CFLAGS_BASE) $(SAN)
LDFLAGS  += $(SAN)
LIBS_RT  = -lvulkan -lutf8proc -lcjson -lm -lpthread
LIBS_SRV = -lmicrohttpd -lcjson
LIBS_GEN = -Wl,--start-group -lshaderc_combined -lglslang -lMachineIndependent -lOSDependent -lOGLCompiler -lGenericCodeGen -lSPIRV -lSPIRV-Tools-opt -lSPIRV-Tools -Wl,--end-group -lstdc++ -lyaml -lm -lpthread

MODELS   := $(basename $(notdir $(wildcard models/*.yaml)))

FMT_SRC  := $(wildcard format/*.c)
DSL_SRC  := $(wildcard dsl/*.c)
CLI_SRC  := $(filter-out runtime/cli/rt_cli_main.c,$(wildcard runtime/cli/*.c))
RT_SRC   := $(filter-out runtime/cli/%,$(wildcard runtime/*/*.c))
GEN_SRC  := $(filter-out gen/main.c,$(wildcard gen/*.c gen/*/*.c))
REF_SRC  := $(wildcard tests/ref/*.c)
SRV_SRC  := $(filter-out server/srv_main.c server/srv_model_ternion.c,$(wildcard server/*.c))
TEST_SRC := $(wildcard tests/test_*.c)
TOOL_SRC := $(wildcard tools/*.c)
EX_API_SRC := examples/simple.c examples/batched.c
EX_SRC   := $(filter-out $(EX_API_SRC),$(wildcard examples/*.c))

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

LIB_FMT := $(B)/libtfmt.a
LIB_DSL := $(B)/libtdsl.a
LIB_RT  := $(B)/libtrt.a
LIB_GEN := $(B)/libtgen.a
LIB_REF := $(B)/libtref.a
LIB_SRV := $(B)/libtsrv.a
SRV_BIN := $(B)/ternion-server
SRV_OBJ := $(call obj,server/srv_main.c server/srv_model_ternion.c)
GEN_BIN := $(B)/ternion-gen
TESTS   := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
TOOLS   := $(patsubst tools/%.c,$(B)/tools/%,$(TOOL_SRC))
EXAMPLES:= $(patsubst examples/%.c,$(B)/examples/%,$(EX_SRC))
EXAMPLES_API := $(patsubst examples/%.c,$(B)/examples/%,$(EX_API_SRC))
MODEL_BINS := $(addprefix $(B)/,$(MODELS))
CLI_BIN  := $(B)/ternion
LIB_A    := $(B)/libternion.a
LIB_SO   := $(B)/libternion.so
LIB_MODELS := $(B)/libtmodels.a
CLI_OBJ  := $(call obj,$(CLI_SRC))
MODEL_OBJ := $(patsubst %,$(B)/obj/generated/%/model.o,$(MODELS))
LIB_OBJ  := $(call obj,$(RT_SRC) $(FMT_SRC)) $(MODEL_OBJ) $(B)/obj/registry.o $(B)/obj/commit.o

.PHONY: all gen test asan validate bench run fuzz cross-cpu clean check-generated models examples install lib FORCE \
        deploy-test
all: $(LIB_FMT) $(LIB_DSL) $(LIB_RT) $(LIB_GEN) $(LIB_SRV) $(GEN_BIN) lib $(CLI_BIN) $(MODEL_BINS) $(TOOLS) $(EXAMPLES) \
     $(EXAMPLES_API) $(TESTS) $(B)/cli-api-check $(SRV_BIN) $(B)/srv-api-check
# the model binaries and what a user runs on a new YAML row: the generator and the tools
# (mkmodel writes a random-weight file of a variant), relinked when a table row changes
models: $(MODEL_BINS) $(GEN_BIN) $(TOOLS)
lib: $(LIB_A) $(LIB_SO)
examples: $(EXAMPLES) $(EXAMPLES_API)

$(B)/obj/%.o: %.c | dsl/dsl_ops.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@
# (make's built-in "link X from X.o" would otherwise try to make the included .d files)
%: %.o

# Library objects: position-independent (for libternion.so), symbols hidden unless marked
# TERNION_API in ternion.h.
$(B)/obj/runtime/%.o $(B)/obj/format/%.o $(B)/obj/generated/%.o $(B)/obj/registry.o $(B)/obj/commit.o: CFLAGS += -fPIC -fvisibility=hidden

# The CLI and the API examples see only the public header: any include of the engine's
# headers fails to compile (and cli-api-check below fails to link any call past ternion.h).
CFLAGS_API = -std=c11 -g $(OPT) -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wvla \
             -Wno-format-truncation -D_DEFAULT_SOURCE -Iruntime/api $(SAN)
$(CLI_OBJ): $(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_API) -MMD -MP -c $< -o $@
$(B)/obj/cli-main/ternion.o: runtime/cli/rt_cli_main.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_API) -MMD -MP -c $< -o $@
$(B)/obj/cli-main/%.o: runtime/cli/rt_cli_main.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_API) -DRT_CLI_MODEL='"$*"' -MMD -MP -c $< -o $@

# The shader DSL's op builders, dsl_<name>(k, ...) per row of its op table: written by
# tools/dsl_ops_h.sh into dsl/dsl_ops.h (included by dsl.h), before any object is compiled,
# whenever the table changes. The file is committed, so a checkout builds and reads as is;
# check-generated fails when it is not what the table gives.
dsl/dsl_ops.h: dsl/dsl_ops.def tools/dsl_ops_h.sh
	@t=$@.tmp.$$$$; sh tools/dsl_ops_h.sh dsl/dsl_ops.def > $$t || { rm -f $$t; exit 1; }; \
	 if cmp -s $$t $@; then rm -f $$t; touch $@; else mv $$t $@; echo "wrote $@"; fi

# The registry of generated models (runtime/api/rt_registry.h): every
# `const rt_model_desc rt_model_<id>` the generated model.c files define (tools/registry_c.sh).
# Rewritten when its text changes (a model added or removed changes no prerequisite's time),
# after checking that every models/X.yaml is named X (gen/check_models.sh: no model defined
# twice).
$(B)/registry.c: $(patsubst %,generated/%/model.c,$(MODELS)) tools/registry_c.sh Makefile FORCE
	@mkdir -p $(B)
	@sh gen/check_models.sh
	@sh tools/registry_c.sh $(patsubst %,generated/%/model.c,$(sort $(MODELS))) > $@.tmp && \
	  if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(B)/obj/registry.o: $(B)/registry.c
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@
# A model's own binary (build/<model>) has a registry of that model alone, so that it links
# that model's kernels and tables, not all of libternion's (each model's SPIR-V is megabytes:
# every binary carrying every model's made the build directory gigabytes).
$(B)/registry-%.c: generated/%/model.c tools/registry_c.sh
	@mkdir -p $(B)
	@sh tools/registry_c.sh $< > $@
$(B)/obj/registry-%.o: $(B)/registry-%.c
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@
.PRECIOUS: $(B)/registry-%.c

# The git commit of the build (ternion_commit, --version); rewritten only when it changes.
GIT_COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(B)/commit.c: FORCE
	@mkdir -p $(B)
	@echo 'const char rt_git_commit[] = "$(GIT_COMMIT)";' > $@.tmp; \
	 if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(B)/obj/commit.o: $(B)/commit.c
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB_A): $(LIB_OBJ)
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIB_SO): $(LIB_OBJ)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libternion.so.0 -Wl,--no-undefined -o $@ $^ $(LIBS_RT)
	ln -sf libternion.so $(B)/libternion.so.0

$(LIB_MODELS): $(MODEL_OBJ)
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIB_FMT): $(call obj,$(FMT_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIB_DSL): $(call obj,$(DSL_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIB_RT): $(call obj,$(RT_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIB_GEN): $(call obj,$(GEN_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIB_REF): $(call obj,$(REF_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIB_SRV): $(call obj,$(SRV_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^

$(GEN_BIN): $(call obj,gen/main.c) $(LIB_GEN) $(LIB_DSL) $(LIB_RT) $(LIB_FMT)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_GEN) $(LIBS_RT)

# Static pattern rules below name every object explicitly, so make never treats one
# as an intermediate file (deleted after the link, then not rebuilt on a header change).

# SPIR-V is built, never checked in: every generated/<model>/kernels/<k>.comp is compiled
# with glslc into $(B)/spv/<model>/kernels/<k>.spv, and again with DSL_NATIVE_DOT defined
# into <k>.native-dot.spv when its source has that variant (the integer-dot kernels), and
# with DSL_COOPMAT into <k>.coopmat.spv (the prefill bitlinears' cooperative-matrix tile).
# tools/spv_inc.sh writes them as C arrays into $(B)/spv/<model>/kernels.spv.inc, which
# generated/<model>/model.c includes, so the library and binaries run standalone. Make's
# timestamps are the cache: a kernel is recompiled only when its .comp changes; a .comp whose
# text another model's kernel already has is copied, not compiled again (tools/glslc_once.sh).
GLSLC      ?= glslc
GLSLC_FLAGS = --target-env=vulkan1.2 --target-spv=spv1.5 -O -fshader-stage=compute
COMPS      := $(wildcard generated/*/kernels/*.comp)
DOT_COMPS  := $(if $(COMPS),$(shell grep -l DSL_NATIVE_DOT $(COMPS)))
MMA_COMPS  := $(if $(COMPS),$(shell grep -l DSL_COOPMAT $(COMPS)))
spv_of      = $(patsubst generated/%.comp,$(B)/spv/%.spv,$(filter generated/$(1)/%,$(COMPS))) \
              $(patsubst generated/%.comp,$(B)/spv/%.native-dot.spv,$(filter generated/$(1)/%,$(DOT_COMPS))) \
              $(patsubst generated/%.comp,$(B)/spv/%.coopmat.spv,$(filter generated/$(1)/%,$(MMA_COMPS)))

GLSLC_ONCE  = sh tools/glslc_once.sh $(B)/spv/.once
$(B)/spv/%.native-dot.spv: generated/%.comp tools/glslc_once.sh
	$(GLSLC_ONCE) $@ $< $(GLSLC) $(GLSLC_FLAGS) -DDSL_NATIVE_DOT=1
$(B)/spv/%.coopmat.spv: generated/%.comp tools/glslc_once.sh
	$(GLSLC_ONCE) $@ $< $(GLSLC) $(GLSLC_FLAGS) -DDSL_COOPMAT=1
$(B)/spv/%.spv: generated/%.comp tools/glslc_once.sh
	$(GLSLC_ONCE) $@ $< $(GLSLC) $(GLSLC_FLAGS)

define MODEL_SPV
$(B)/spv/$(1)/kernels.spv.inc: $(call spv_of,$(1)) tools/spv_inc.sh
	sh tools/spv_inc.sh $$@ $(call spv_of,$(1))
$(B)/obj/generated/$(1)/model.o: $(B)/spv/$(1)/kernels.spv.inc
endef
$(foreach m,$(MODELS),$(eval $(call MODEL_SPV,$(m))))

# The CLI: `ternion`, and one binary per model with that model pinned and linked alone (static:
# they run anywhere the Vulkan loader is, e.g. copied to a GPU machine).
$(CLI_BIN): $(B)/obj/cli-main/ternion.o $(CLI_OBJ) $(LIB_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_RT)
$(MODEL_BINS): $(B)/%: $(B)/obj/cli-main/%.o $(CLI_OBJ) $(B)/obj/registry-%.o $(LIB_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_RT)
$(B)/obj/generated/%/model.o: generated/%/model.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(B)/spv/$* -MMD -MP -c $< -o $@
# Proof that the CLI calls nothing but ternion.h: linked against the shared library, which
# exports only ternion_* (any other symbol is an undefined reference); and the exports are
# exactly the functions ternion.h declares.
$(B)/cli-api-check: $(B)/obj/cli-main/ternion.o $(CLI_OBJ) $(LIB_SO) runtime/api/ternion.h
	$(CC) $(LDFLAGS) -o $(B)/obj/cli-shared $(B)/obj/cli-main/ternion.o $(CLI_OBJ) $(LIB_SO) $(LIBS_RT)
	@sh tests/check_exports.sh $(LIB_SO) runtime/api/ternion.h
	@touch $@

# The HTTP server; srv-api-check proves it calls nothing but ternion.h (as cli-api-check).
$(SRV_BIN): $(SRV_OBJ) $(LIB_SRV) $(LIB_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_SRV) $(LIBS_RT)
$(B)/srv-api-check: $(SRV_OBJ) $(LIB_SRV) $(LIB_SO)
	$(CC) $(LDFLAGS) -o $(B)/obj/srv-shared $^ $(LIBS_SRV) $(LIBS_RT)
	@touch $@

# test_api, test_api_sampling, test_batch_sizes and test_constrained see only ternion.h, like any
# program using the library (test_constrained also runs the CLI: tests/cli_run.o).
API_TESTS := $(B)/tests/test_api $(B)/tests/test_api_sampling $(B)/tests/test_batch_sizes $(B)/tests/test_constrained
# They link the shared library (found beside the build's binaries: $ORIGIN/..), as such a
# program would, and so that each does not carry a copy of every model's kernels.
LINK_SO := $(LIB_SO) -Wl,-rpath,'$$ORIGIN/..'
$(API_TESTS): $(B)/tests/%: tests/%.c $(LIB_SO) runtime/api/ternion.h tests/fixture.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_API) -o $@ $< $(filter %.o,$^) $(LINK_SO) -lcmocka $(LIBS_RT)
# (objects first, then the libraries: a shared test object below may call any of them)
$(filter-out $(API_TESTS),$(TESTS)): $(B)/tests/%: $(call obj,tests/%.c) $(LIB_REF) $(LIB_GEN) $(LIB_DSL) $(LIB_SRV) $(LIB_RT) $(LIB_FMT)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(filter-out %.o,$^) -lcmocka $(LIBS_GEN) $(LIBS_SRV) $(LIBS_RT)
# test_cpu runs the generated models' CPU schedules (their tables, not the GLSL): from an
# archive of the models' objects, so that it links the few it names, not all of them
$(B)/tests/test_cpu: $(LIB_MODELS)
# test_embed and test_cli_limits call ternion.h beside the engine and the reference, on the same
# models; test_chat_tmpl loads the GGUFs it writes through ternion.h; test_draft runs drafts beside
# the generated models and loads its hand-made files through ternion.h
$(B)/tests/test_embed $(B)/tests/test_cli_limits $(B)/tests/test_chat_tmpl $(B)/tests/test_draft: $(MODEL_OBJ) \
    $(B)/obj/registry.o $(B)/obj/commit.o
# test_oracle runs a models/X.yaml case on the built-in description (the registry), as users do
$(B)/tests/test_oracle: $(MODEL_OBJ) $(B)/obj/registry.o
# the suites that run the command-line binaries share their runner (tests/cli_run.c)
$(B)/tests/test_cli $(B)/tests/test_trained $(B)/tests/test_constrained: $(call obj,tests/cli_run.c)
# the suites that run kernels on a Vulkan device share their harness (tests/vk_harness.c)
$(B)/tests/test_kernels $(B)/tests/test_kernels_fused $(B)/tests/test_kernels_tq $(B)/tests/test_dsl_gpu \
$(B)/tests/test_sparse $(B)/tests/test_moe: $(call obj,tests/vk_harness.c)
$(TOOLS): $(B)/tools/%: $(call obj,tools/%.c) $(LIB_GEN) $(LIB_DSL) $(LIB_RT) $(LIB_FMT)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_GEN) $(LIBS_RT)
$(EXAMPLES): $(B)/examples/%: $(call obj,examples/%.c) $(LIB_GEN) $(LIB_DSL) $(LIB_RT) $(LIB_FMT)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_GEN) $(LIBS_RT)
$(EXAMPLES_API): $(B)/examples/%: examples/%.c $(LIB_SO) runtime/api/ternion.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_API) -o $@ $< $(LINK_SO) $(LIBS_RT)

# `make gen`: regenerate generated/<model>/ from models/<model>.yaml (deterministic). The
# models are generated side by side, as many at once as make's -j says (each takes seconds:
# every kernel is compiled to check it), each into $(B)/gen.new/ first and moved into
# generated/ only when complete, so an interrupted or failed run leaves the previous output
# in place; files whose bytes did not change keep their times (gen/gen_sync.sh), so only
# changed kernels are recompiled.
gen: $(GEN_BIN)
	@sh gen/check_models.sh
	@rm -rf $(B)/gen.new && mkdir -p $(B)/gen.new && \
	jobs=$$(echo " $(MAKEFLAGS)" | sed -n 's/.* -j *\([0-9][0-9]*\).*/\1/p'); \
	printf '%s\n' $(MODELS) | xargs -P "$${jobs:-1}" -I{} sh -c \
	    '$(GEN_BIN) models/{}.yaml -o $(B)/gen.new/{} && sh gen/gen_sync.sh $(B)/gen.new/{} generated/{}'

$(patsubst %,generated/%/model.c,$(MODELS)):
	@echo "$@ is missing: run 'make gen'"; exit 1

# CI guard: generated/ must be exactly what `make gen` writes, dsl/dsl_ops.h what its table gives.
# The models are generated side by side, as many at once as make's -j says (as `make gen`),
# text only (--text-only: no in-process SPIR-V; the build compiles every .comp with glslc, and
# compiling them again here took about two minutes of a 2-core machine).
check-generated: $(GEN_BIN)
	@sh tools/dsl_ops_h.sh dsl/dsl_ops.def | cmp -s - dsl/dsl_ops.h || { echo "dsl/dsl_ops.h is stale: run 'make' and commit it"; exit 1; }
	@rm -rf $(B)/gencheck; mkdir -p $(B)/gencheck
	@jobs=$$(echo " $(MAKEFLAGS)" | sed -n 's/.* -j *\([0-9][0-9]*\).*/\1/p'); \
	printf '%s\n' $(MODELS) | xargs -P "$${jobs:-1}" -I{} sh -c '$(GEN_BIN) --text-only models/{}.yaml -o $(B)/gencheck/{} || exit 255'
	@diff -r generated $(B)/gencheck >/dev/null || { echo "generated/ is stale: run 'make gen' and commit"; diff -r generated $(B)/gencheck | head -20; exit 1; }
	@echo "generated/ matches make gen"

# The generator's suites (test_yaml, test_gen) run built with UBSan, in place of their plain
# builds (signed overflow in the shape arithmetic is invisible otherwise); under `make asan`
# every suite already has it. The kernel suites run again at 4- and 16-lane subgroups
# (lavapipe only): tests/run_subgroups.sh writes a wrapper per width and suite, which join the
# other suites in one pool of tests/run_tests.sh (two at a time).
ifeq ($(SAN),)
GEN_UBSAN := $(B)/ubsan/tests/test_yaml $(B)/ubsan/tests/test_gen
endif
TEST_RUN := $(filter-out $(patsubst $(B)/ubsan/%,$(B)/%,$(GEN_UBSAN)),$(TESTS)) $(GEN_UBSAN)

.PHONY: gen-ubsan
gen-ubsan:
	@$(MAKE) --no-print-directory B=$(B)/ubsan SAN="-fsanitize=undefined -fno-sanitize-recover=undefined" $(GEN_UBSAN)

test: all check-generated $(if $(GEN_UBSAN),gen-ubsan)
	@sh tests/check_sizes.sh
	@sh tests/check_doc_paths.sh
	@sh tests/check_includes.sh
	@sh gen/check_models.sh
	@B=$(B) sh tests/check_calls.sh
	@sh tests/check_fuzz_deps.sh
	@B=$(B) SAN="$(SAN)" sh tests/check_install.sh
	@B=$(B) sh tests/run_subgroups.sh $(B)/sweep
	@rm -rf $(B)/spv-cache && mkdir -p $(B)/spv-cache
	@B=$(B) TERNION_BUILD=$(B) TERNION_SPV_CACHE=$(abspath $(B))/spv-cache sh tests/run_tests.sh $(TEST_RUN) $$(cat $(B)/sweep/list)

# (TERNION_BUILD tells the suites that run binaries, e.g. test_cli, which build to run: the
# test rule sets it to $(B), so `make asan` runs build-asan/'s binaries, not build/'s.
# TERNION_SPV_CACHE: the suites build the same test models' kernels in separate processes
# (the kernel suites, their subgroup sweep, the end-to-end suites); one folder, emptied at the
# start of each run, keeps each source's SPIR-V for the others: dsl/dsl_disk_cache.c.)
# Instrumented at -O1 the suites run several times slower: test_kernels and test_oracle ran past
# tests/run_tests.sh's SUITE_TIMEOUT (20 minutes, a guard against hangs) on a 2-core machine and
# were killed, so this run allows each suite 2 hours.
asan:
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 SUITE_TIMEOUT=$${SUITE_TIMEOUT:-7200} \
	$(MAKE) B=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

# The test suite with the Khronos validation layer on every Vulkan instance; any
# validation message fails the run (tests/run_tests.sh checks the output).
validate:
	VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation $(MAKE) test

bench: all
	@sh tests/bench.sh $(B)

# Two server replicas behind Debian's nginx (docs/deploy.md): round-robin, failover, no request
# lost in a graceful stop. Needs nginx (apt-get install nginx-light); not part of `make test`.
deploy-test: $(SRV_BIN)
	@B=$(B) sh tests/deploy_test.sh

run: all
	@sh tests/run_default.sh $(B) $(MODEL)

fuzz:
	@sh tests/fuzz/run_fuzz.sh

# The CPU backend's NEON path compiles for AArch64 (needs Debian's gcc-aarch64-linux-gnu; the
# project measures nothing on ARM): every runtime/cpu/ file, warnings as errors.
CROSS_CC ?= aarch64-linux-gnu-gcc
cross-cpu:
	@command -v $(CROSS_CC) >/dev/null || { echo "cross-cpu: $(CROSS_CC) not found (apt-get install gcc-aarch64-linux-gnu)"; exit 1; }
	@mkdir -p $(B)/cross
	@for f in runtime/cpu/*.c; do $(CROSS_CC) $(CFLAGS_BASE) -c $$f -o $(B)/cross/$$(basename $$f .c).o || exit 1; done
	@echo "cross-cpu: runtime/cpu/ compiles for AArch64 (NEON) with $(CROSS_CC)"

# `make install PREFIX=/opt/ternion` (DESTDIR for staging): the library (static, shared),
# ternion.h, the pkg-config file, the CLI, the model binaries and ternion-server, the model YAMLs (for
# --bench) and the random-weight model writer. Programs then build with
#   cc app.c $(pkg-config --cflags --libs ternion)
PREFIX  ?= /usr/local
VERSION := $(shell sed -n 's/^\#define TERNION_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' runtime/api/ternion.h | paste -sd.)
install: lib $(CLI_BIN) $(MODEL_BINS) $(SRV_BIN) $(B)/tools/mkmodel $(GEN_BIN)
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/share/ternion/models
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/libternion.a
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/libternion.so.$(VERSION)
	ln -sf libternion.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libternion.so.0
	ln -sf libternion.so.0 $(DESTDIR)$(PREFIX)/lib/libternion.so
	install -m 644 runtime/api/ternion.h $(DESTDIR)$(PREFIX)/include/ternion.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' runtime/api/ternion.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ternion.pc
	install -m 755 $(CLI_BIN) $(MODEL_BINS) $(SRV_BIN) $(DESTDIR)$(PREFIX)/bin/
	install -m 755 $(B)/tools/mkmodel $(DESTDIR)$(PREFIX)/bin/ternion-mkmodel
	install -m 755 $(GEN_BIN) $(DESTDIR)$(PREFIX)/bin/ternion-gen
	install -m 644 models/*.yaml $(DESTDIR)$(PREFIX)/share/ternion/models/

clean:
	rm -rf build build-asan

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
