# Ternion build. Plain GNU make; everything lands in $(B)/ (build/ by default,
# build-asan/ for `make asan`). Layout:
#   dsl/*.c            -> $(B)/libtdsl.a     typed shader builder (GLSL 450 + shaderc)
#   runtime/*.c        -> $(B)/libtrt.a      GGUF, Vulkan runtime, tokenizer, sampler, CLI
#   gen/*.c (not main) -> $(B)/libtgen.a     YAML model reader, passes, kernel builders
#   gen/main.c         -> $(B)/ternion-gen   `make gen`: models/X.yaml -> generated/X/
#   generated/X/*.c    -> $(B)/X             one binary per model (runtime + schedule)
#   tests/test_*.c     -> $(B)/tests/test_*  cmocka suites (tests/ref/*.c: CPU reference)
#   server/*.c         -> $(B)/libtsrv.a     HTTP server (libmicrohttpd + cJSON)
#   tools/*.c          -> $(B)/tools/*       helpers (random-weight model writer, ...)
#   examples/*.c       -> $(B)/examples/*
# Useful targets: all (default), gen, test, asan, bench, run, fuzz, clean.

B        ?= build
CC       ?= cc
OPT      ?= -O2
CFLAGS_BASE = -std=c11 -g $(OPT) -Wall -Wextra -Werror -Wno-unused-parameter \
              -Wshadow -Wvla -Wno-format-truncation -D_DEFAULT_SOURCE -fno-strict-aliasing -I. -Idsl -Igen -Iruntime
SAN      ?=
CFLAGS   += $(CFLAGS_BASE) $(SAN)
LDFLAGS  += $(SAN)
LIBS_RT  = -lvulkan -lutf8proc -lm -lpthread
LIBS_SRV = -lmicrohttpd -lcjson
LIBS_GEN = -Wl,--start-group -lshaderc_combined -lglslang -lMachineIndependent -lOSDependent -lOGLCompiler -lGenericCodeGen -lSPIRV -lSPIRV-Tools-opt -lSPIRV-Tools -Wl,--end-group -lstdc++ -lyaml -lm -lpthread

MODELS   := $(basename $(notdir $(wildcard models/*.yaml)))

DSL_SRC  := $(wildcard dsl/*.c)
RT_SRC   := $(wildcard runtime/*/*.c)
GEN_SRC  := $(filter-out gen/main.c,$(wildcard gen/*.c gen/*/*.c))
REF_SRC  := $(wildcard tests/ref/*.c)
SRV_SRC  := $(filter-out server/srv_main.c server/srv_model_ternion.c,$(wildcard server/*.c))
TEST_SRC := $(wildcard tests/test_*.c)
TOOL_SRC := $(wildcard tools/*.c)
EX_SRC   := $(wildcard examples/*.c)

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

LIB_DSL := $(B)/libtdsl.a
LIB_RT  := $(B)/libtrt.a
LIB_GEN := $(B)/libtgen.a
LIB_REF := $(B)/libtref.a
LIB_SRV := $(B)/libtsrv.a
GEN_BIN := $(B)/ternion-gen
TESTS   := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
TOOLS   := $(patsubst tools/%.c,$(B)/tools/%,$(TOOL_SRC))
EXAMPLES:= $(patsubst examples/%.c,$(B)/examples/%,$(EX_SRC))
MODEL_BINS := $(addprefix $(B)/,$(MODELS))

.PHONY: all gen test asan validate bench run fuzz clean check-generated models
all: $(LIB_DSL) $(LIB_RT) $(LIB_GEN) $(LIB_SRV) $(GEN_BIN) $(MODEL_BINS) $(TOOLS) $(EXAMPLES) $(TESTS)
models: $(MODEL_BINS)

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

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

$(GEN_BIN): $(call obj,gen/main.c) $(LIB_GEN) $(LIB_DSL)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_GEN) $(LIBS_RT)

# Static pattern rules below name every object explicitly, so make never treats one
# as an intermediate file (deleted after the link, then not rebuilt on a header change).

# One binary per model: the generated schedule + the shared runtime/CLI.
$(MODEL_BINS): $(B)/%: $(B)/obj/generated/%/model.o $(LIB_RT)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_RT)
$(B)/obj/generated/%/model.o: generated/%/model.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wno-overlength-strings -MMD -MP -c $< -o $@

$(TESTS): $(B)/tests/%: $(call obj,tests/%.c) $(LIB_REF) $(LIB_GEN) $(LIB_DSL) $(LIB_SRV) $(LIB_RT)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(LIBS_GEN) $(LIBS_SRV) $(LIBS_RT)
$(TOOLS): $(B)/tools/%: $(call obj,tools/%.c) $(LIB_GEN) $(LIB_DSL) $(LIB_RT)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_GEN) $(LIBS_RT)
$(EXAMPLES): $(B)/examples/%: $(call obj,examples/%.c) $(LIB_GEN) $(LIB_DSL) $(LIB_RT)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_GEN) $(LIBS_RT)

# `make gen`: regenerate generated/<model>/ from models/<model>.yaml (deterministic).
gen: $(GEN_BIN)
	@for m in $(MODELS); do rm -rf generated/$$m && $(GEN_BIN) models/$$m.yaml -o generated/$$m || exit 1; done

$(patsubst %,generated/%/model.c,$(MODELS)):
	@echo "$@ is missing: run 'make gen'"; exit 1

# CI guard: generated/ must be exactly what `make gen` writes.
check-generated: $(GEN_BIN)
	@rm -rf $(B)/gencheck; mkdir -p $(B)/gencheck
	@for m in $(MODELS); do $(GEN_BIN) models/$$m.yaml -o $(B)/gencheck/$$m || exit 1; done
	@diff -r generated $(B)/gencheck >/dev/null || { echo "generated/ is stale: run 'make gen' and commit"; diff -r generated $(B)/gencheck | head -20; exit 1; }
	@echo "generated/ matches make gen"

# The generator's suites (test_yaml, test_gen) run built with UBSan, in place of their plain
# builds (signed overflow in the shape arithmetic is invisible otherwise); under `make asan`
# every suite already has it. Then the kernel suites again at 4- and 16-lane subgroups
# (lavapipe only; see the script).
ifeq ($(SAN),)
GEN_UBSAN := $(B)/ubsan/tests/test_yaml $(B)/ubsan/tests/test_gen
endif
TEST_RUN := $(filter-out $(patsubst $(B)/ubsan/%,$(B)/%,$(GEN_UBSAN)),$(TESTS)) $(GEN_UBSAN)

.PHONY: gen-ubsan
gen-ubsan:
	@$(MAKE) --no-print-directory B=$(B)/ubsan SAN="-fsanitize=undefined -fno-sanitize-recover=undefined" $(GEN_UBSAN)

test: all check-generated $(if $(GEN_UBSAN),gen-ubsan)
	@B=$(B) sh tests/run_tests.sh $(TEST_RUN)
	@B=$(B) sh tests/run_subgroups.sh

asan:
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	$(MAKE) B=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

# The test suite with the Khronos validation layer on every Vulkan instance; any
# validation message fails the run (tests/run_tests.sh checks the output).
validate:
	VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation $(MAKE) test

bench: all
	@sh tests/bench.sh $(B)

run: all
	@sh tests/run_default.sh $(B) $(MODEL)

fuzz:
	@sh tests/fuzz/run_fuzz.sh

clean:
	rm -rf build build-asan

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
