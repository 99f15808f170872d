# mk/fuzz.mk - libFuzzer targets (tests/fuzz/), included by the Makefile after its
# variables (BUILD, CC, ALL_CFLAGS, CFLAGS_DEPS, LIBS_*, VERSION, Q).
#   make fuzz            build the targets with clang + ASan/UBSan into build-fuzz/ and run
#                        each for FUZZ_SECONDS (default 60) on a scratch copy of its corpus;
#                        crash files go to build-fuzz/crashes/ and make fails if there are any
#   make fuzz-regress    replay tests/fuzz/corpus/* and tests/fuzz/crashes/ through the same
#                        entry points, built with $(CC) (no libFuzzer) into $(BUILD)/tests/
#   make fuzz-clean      remove build-fuzz/
# Knobs: FUZZ_SECONDS, FUZZ_TIMEOUT (seconds per input, default 10), FUZZ_NAMES, FUZZ_FLAGS
# (extra libFuzzer flags, e.g. -fork=4 -ignore_crashes=1), FUZZ_CC (default clang).

# Included before or after the Makefile's first target: this file never sets the default goal.
FUZZ_SAVED_GOAL := $(.DEFAULT_GOAL)

FUZZ_SECONDS ?= 60
FUZZ_TIMEOUT ?= 10
FUZZ_FLAGS   ?=
FUZZ_CC      ?= clang
FUZZ_BUILD   := build-fuzz
FUZZ_NAMES   := request wal

# Fresh objects for clang: never the gcc ones. Library objects get the coverage
# instrumentation without libFuzzer's main (fuzzer-no-link); the targets link -fsanitize=fuzzer.
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS   = -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -g -O1 \
                -fno-omit-frame-pointer -Wall -Wextra -DDPB_VERSION=\"$(VERSION)\" -MMD -MP \
                $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_LDFLAGS  = $(FUZZ_SAN) -fsanitize=fuzzer

FUZZ_CORE_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(wildcard core/*/*.c))
FUZZ_SRV_OBJ  := $(FUZZ_BUILD)/server/codec.o $(FUZZ_BUILD)/server/codec_event.o \
                 $(FUZZ_BUILD)/server/codec_encode.o $(FUZZ_BUILD)/server/problem.o \
                 $(FUZZ_BUILD)/server/jsonout.o $(FUZZ_BUILD)/server/jsonin.o
FUZZ_T_OBJ    := $(FUZZ_BUILD)/tests/fuzz/fuzz_request.o $(FUZZ_BUILD)/tests/fuzz/fuzz_wal.o \
                 $(FUZZ_BUILD)/tests/fuzz/memo.o
FUZZ_BIN      := $(FUZZ_BUILD)/fuzz_request $(FUZZ_BUILD)/fuzz_wal

FUZZ_REGRESS_BIN := $(BUILD)/tests/fuzz_regress_request $(BUILD)/tests/fuzz_regress_wal

# The log-replay target remembers RDP curves and spends (tests/fuzz/memo.c: the numerics were most
# of its time); its replay in make test links the same memo.
FUZZ_WAL_WRAP := -Wl,--wrap=dp_rdp_curve,--wrap=dp_epsilon_ex

.PHONY: fuzz fuzz-regress fuzz-deps fuzz-clean

$(FUZZ_CORE_OBJ) $(FUZZ_SRV_OBJ) $(FUZZ_T_OBJ): $(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(CFLAGS_DEPS) -c $< -o $@

$(FUZZ_BUILD)/libdpcore.a: $(FUZZ_CORE_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_request: $(FUZZ_BUILD)/tests/fuzz/fuzz_request.o $(FUZZ_SRV_OBJ) \
                            $(FUZZ_BUILD)/libdpcore.a
	@$(if $(Q),echo "  FUZZLD  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_LDFLAGS) -o $@ $^ $(LIBS_SERVER) $(LIBS_CORE)

$(FUZZ_BUILD)/fuzz_wal: $(FUZZ_BUILD)/tests/fuzz/fuzz_wal.o $(FUZZ_BUILD)/tests/fuzz/memo.o \
                        $(FUZZ_BUILD)/libdpcore.a
	@$(if $(Q),echo "  FUZZLD  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_LDFLAGS) $(FUZZ_WAL_WRAP) -o $@ $^ $(LIBS_CORE)

fuzz-deps:
	@sh scripts/fuzz-deps.sh $(FUZZ_CC)
$(FUZZ_CORE_OBJ) $(FUZZ_SRV_OBJ) $(FUZZ_T_OBJ): | fuzz-deps

# Each target runs on a scratch copy of its committed corpus (new inputs stay in
# build-fuzz/corpus/), with its dictionary; both run even if one fails. The figures
# libFuzzer prints (coverage, exec/s) are repeated at the end; the full logs stay in
# build-fuzz/fuzz_<target>.log.
fuzz: $(FUZZ_BIN)
	$(Q)rm -rf $(FUZZ_BUILD)/corpus $(FUZZ_BUILD)/crashes && mkdir -p $(FUZZ_BUILD)/crashes
	$(Q)status=0; for t in $(FUZZ_NAMES); do \
	    mkdir -p $(FUZZ_BUILD)/corpus/$$t && cp tests/fuzz/corpus/$$t/* $(FUZZ_BUILD)/corpus/$$t/; \
	    dict=; [ -f tests/fuzz/$$t.dict ] && dict=-dict=tests/fuzz/$$t.dict; \
	    echo "== fuzz_$$t for $(FUZZ_SECONDS) s (log: $(FUZZ_BUILD)/fuzz_$$t.log)"; \
	    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    ./$(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) \
	        -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/crashes/$$t- $$dict $(FUZZ_FLAGS) \
	        $(FUZZ_BUILD)/corpus/$$t >$(FUZZ_BUILD)/fuzz_$$t.log 2>&1 || status=1; \
	    grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::|ERROR:|SUMMARY:|runtime error|invariant violated' \
	        $(FUZZ_BUILD)/fuzz_$$t.log; \
	    grep -E '^#[0-9]+: cov:' $(FUZZ_BUILD)/fuzz_$$t.log | tail -n 1; \
	done; \
	if [ -n "$$(ls -A $(FUZZ_BUILD)/crashes)" ]; then \
	    echo "fuzz: crash files (copy each to tests/fuzz/crashes/ once understood):"; \
	    ls -l $(FUZZ_BUILD)/crashes; status=1; \
	fi; \
	[ $$status -eq 0 ] && echo "fuzz: no crash in $(FUZZ_SECONDS) s per target"; exit $$status

fuzz-clean:
	rm -rf $(FUZZ_BUILD)

# ---- replay with the normal compiler (part of the test suite) ----

$(BUILD)/tests/fuzz_regress_request: $(BUILD)/tests/fuzz/regress_main.o \
        $(BUILD)/tests/fuzz/fuzz_request.o $(BUILD)/server/codec.o $(BUILD)/server/codec_event.o \
        $(BUILD)/server/codec_encode.o $(BUILD)/server/problem.o \
        $(BUILD)/server/jsonout.o $(BUILD)/server/jsonin.o \
        $(BUILD)/libdpcore.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_SERVER) $(LIBS_CORE)

$(BUILD)/tests/fuzz_regress_wal: $(BUILD)/tests/fuzz/regress_main.o $(BUILD)/tests/fuzz/fuzz_wal.o \
        $(BUILD)/tests/fuzz/memo.o $(BUILD)/libdpcore.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(FUZZ_WAL_WRAP) -o $@ $^ $(LIBS_CORE)

fuzz-regress: $(FUZZ_REGRESS_BIN)
	$(Q)status=0; \
	./$(BUILD)/tests/fuzz_regress_request tests/fuzz/corpus/request tests/fuzz/crashes || status=1; \
	./$(BUILD)/tests/fuzz_regress_wal tests/fuzz/corpus/wal tests/fuzz/crashes || status=1; \
	exit $$status

-include $(shell find $(FUZZ_BUILD) -name '*.d' 2>/dev/null)

.DEFAULT_GOAL := $(FUZZ_SAVED_GOAL)
