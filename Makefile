# dpbudget - plain Makefile. Quiet unless V=1.
#   make            build build/dpbudgetd and build/libdpcore.a
#   make run        start dpbudgetd on its embedded defaults (127.0.0.1:8080)
#   make test       unit + API tests;   make sanitize: the same under ASan+UBSan
#   make bench      benchmarks (print figures);  make check-layers, format-check, install
#   make schedule-table  docs/LEDGER.md's rounds-per-client table (rdp, pld, rdp_filter)
PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
CC      ?= cc
VERSION := 0.3.0

PKGS_CORE   := gsl fftw3 fftw3l libpq nettle
PKGS_SERVER := libmicrohttpd jansson gnutls nettle hogweed
PKGS_TEST   := libcurl

# Diagnostic paths are truncated on purpose (snprintf); gcc's truncation warning is off.
NO_TRUNC := $(shell $(CC) -Werror -Wno-format-truncation -x c -c -o /dev/null /dev/null 2>/dev/null \
              && echo -Wno-format-truncation)
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith \
           -Wformat=2 $(NO_TRUNC) -Wundef -Werror
CFLAGS  ?= -O2 -g
ALL_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE $(WARN) $(CFLAGS) \
             -DDPB_VERSION=\"$(VERSION)\" -MMD -MP
LIBS_CORE   = $(shell pkg-config --libs $(PKGS_CORE)) -lpthread -lm
LIBS_SERVER = $(shell pkg-config --libs $(PKGS_SERVER)) -lpthread
LIBS_TEST   = $(shell pkg-config --libs $(PKGS_TEST))
CFLAGS_DEPS = $(shell pkg-config --cflags $(PKGS_CORE) $(PKGS_SERVER) $(PKGS_TEST))

ifeq ($(V),1)
Q :=
else
Q := @
endif

CORE_SRC   := $(wildcard core/*/*.c)
SERVER_SRC := $(filter-out server/main.c,$(wildcard server/*.c))
UNIT_SRC   := $(wildcard tests/unit/*.c)
API_SRC    := $(wildcard tests/api/*.c)
PERSIST_SRC := $(wildcard tests/persist/*.c)
PG_SRC     := $(wildcard tests/pg/*.c)

CORE_OBJ   := $(CORE_SRC:%.c=$(BUILD)/%.o)
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/openapi_blob.o $(BUILD)/gen/ui_blob.o
UNIT_OBJ   := $(UNIT_SRC:%.c=$(BUILD)/%.o)
API_OBJ    := $(API_SRC:%.c=$(BUILD)/%.o)
PERSIST_OBJ := $(PERSIST_SRC:%.c=$(BUILD)/%.o) $(BUILD)/tests/api/client.o
PG_OBJ     := $(PG_SRC:%.c=$(BUILD)/%.o)

LIBCORE    := $(BUILD)/libdpcore.a
DAEMON     := $(BUILD)/dpbudgetd
UNIT_BIN   := $(BUILD)/tests/unit_tests
API_BIN    := $(BUILD)/tests/api_tests
PERSIST_BIN := $(BUILD)/tests/persist_tests
PG_BIN     := $(BUILD)/tests/pg_tests
BENCH_BIN  := $(BUILD)/bench/bench_core $(BUILD)/bench/bench_http $(BUILD)/bench/bench_ledger \
              $(BUILD)/bench/bench_shuffle_exact $(BUILD)/bench/bench_isolation $(BUILD)/bench/floor \
              $(BUILD)/bench/bench_pld_sweep $(BUILD)/bench/bench_pld_ledger \
              $(BUILD)/bench/bench_workflow $(BUILD)/bench/bench_replicas $(BUILD)/bench/bench_vocab \
              $(BUILD)/bench/bench_tlog $(BUILD)/bench/bench_time $(BUILD)/bench/bench_rounds

.PHONY: all run test test-slow schedule-table unit api check-readme check-docs sanitize bench bench-pld-full bench-ledger-full check-layers format format-check install \
        uninstall clean deps deps-build
all: $(DAEMON)

# objects depend on the Makefile: flags and VERSION (-DDPB_VERSION) live here
$(BUILD)/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(CFLAGS_DEPS) -c $< -o $@

$(LIBCORE): $(CORE_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# openapi.yaml is served by the daemon: embed it as a byte array.
$(BUILD)/gen/openapi_blob.c: openapi.yaml scripts/embed.sh
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  EMBED   $<")
	$(Q)sh scripts/embed.sh openapi.yaml dpb_openapi_yaml > $@
$(BUILD)/gen/openapi_blob.o: $(BUILD)/gen/openapi_blob.c
	$(Q)$(CC) -std=c11 -c $< -o $@

# the dashboard (served at / and /ui/): embedded the same way, so it works air-gapped
UI_ASSETS := server/ui/index.html server/ui/app.js server/ui/app.css server/ui/charts.js
$(BUILD)/gen/ui_blob.c: $(UI_ASSETS) scripts/embed.sh
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  EMBED   server/ui/")
	$(Q){ sh scripts/embed.sh server/ui/index.html dpb_ui_index_html && \
	  sh scripts/embed.sh server/ui/app.js dpb_ui_app_js && \
	  sh scripts/embed.sh server/ui/app.css dpb_ui_app_css && \
	  sh scripts/embed.sh server/ui/charts.js dpb_ui_charts_js; } > $@.tmp && mv $@.tmp $@
$(BUILD)/gen/ui_blob.o: $(BUILD)/gen/ui_blob.c
	$(Q)$(CC) -std=c11 -c $< -o $@

$(DAEMON): $(BUILD)/server/main.o $(SERVER_OBJ) $(LIBCORE)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_SERVER) $(LIBS_CORE)

$(UNIT_BIN): $(UNIT_OBJ) $(LIBCORE)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)

$(API_BIN): $(API_OBJ) $(SERVER_OBJ) $(LIBCORE)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_TEST) $(LIBS_SERVER) $(LIBS_CORE)

$(PERSIST_BIN): $(PERSIST_OBJ) $(LIBCORE)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_TEST) $(LIBS_SERVER) $(LIBS_CORE)

# the PostgreSQL store against a real server (tests/pg/pgtmp.sh starts one)
$(PG_BIN): $(PG_OBJ) $(LIBCORE)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)

$(BUILD)/bench/bench_core: $(BUILD)/bench/bench_core.o $(LIBCORE)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)
$(BUILD)/bench/bench_ledger: $(BUILD)/bench/bench_ledger.o $(LIBCORE)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)
$(BUILD)/bench/bench_time: $(BUILD)/bench/bench_time.o $(LIBCORE)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)
$(BUILD)/bench/bench_rounds: $(BUILD)/bench/bench_rounds.o $(LIBCORE)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)
$(BUILD)/bench/bench_vocab: $(BUILD)/bench/bench_vocab.o $(LIBCORE)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)
$(BUILD)/bench/bench_tlog: $(BUILD)/bench/bench_tlog.o $(LIBCORE)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)
$(BUILD)/bench/bench_shuffle_exact: $(BUILD)/bench/bench_shuffle_exact.o $(LIBCORE)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)
$(BUILD)/bench/bench_pld_sweep: $(BUILD)/bench/bench_pld_sweep.o $(LIBCORE)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)
$(BUILD)/bench/bench_pld_ledger: $(BUILD)/bench/bench_pld_ledger.o $(LIBCORE)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)
$(BUILD)/bench/bench_http: $(BUILD)/bench/bench_http.o
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ -lpthread
$(BUILD)/bench/bench_workflow: $(BUILD)/bench/bench_workflow.o
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^
$(BUILD)/bench/bench_replicas: $(BUILD)/bench/bench_replicas.o
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ -lpthread
$(BUILD)/bench/bench_isolation: $(BUILD)/bench/bench_isolation.o
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ -lpthread
# the floor of the HTTP figures: bare libmicrohttpd with the daemon's threading
$(BUILD)/bench/floor: $(BUILD)/bench/floor.o
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(shell pkg-config --libs libmicrohttpd) -lpthread

deps:
	@sh scripts/deps.sh
deps-build:
	@sh scripts/deps.sh --build

run: deps-build
	$(Q)$(MAKE) --no-print-directory all
	./$(DAEMON) $(ARGS)

unit: $(UNIT_BIN)
api: $(API_BIN) $(DAEMON)

test: deps
	$(Q)$(MAKE) --no-print-directory check-layers $(UNIT_BIN) $(API_BIN) $(PERSIST_BIN) $(PG_BIN) $(DAEMON) \
	    $(FUZZ_REGRESS_BIN)
	$(Q)sh tests/run.sh $(BUILD)

# the examples of README.md, docs/API.md and docs/PYTHON.md against a fresh daemon each (also part of make test)
check-readme: $(DAEMON)
	$(Q)python3 tests/readme/check_readme.py $(DAEMON)

# nothing tracked points outside the repository; docs links resolve (also part of make test)
check-docs: $(DAEMON)
	$(Q)python3 tests/docs/check_refs.py --daemon $(DAEMON)

# slow numerical sweeps (minutes): not part of make test
$(BUILD)/tests/slow_sweep: $(BUILD)/tests/slow/sweep_shuffle_exact.o $(LIBCORE)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)

$(BUILD)/tests/slow_sampling: $(BUILD)/tests/slow/sweep_sampling.o $(LIBCORE)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)

test-slow: deps
	$(Q)$(MAKE) --no-print-directory $(BUILD)/tests/slow_sweep $(BUILD)/tests/slow_sampling $(DAEMON)
	$(Q)./$(BUILD)/tests/slow_sampling
	$(Q)./$(BUILD)/tests/slow_sweep
	$(Q)DPB_GENERATED_PHASES=examples,coverage,fuzzing,stateful clients/python/.venv/bin/python tests/generated/run.py clients/python/.venv/bin/python $(DAEMON)
	$(Q)clients/python/.venv/bin/python tests/oracle/dp_accounting_diff.py $(DAEMON) --cases 300

# docs/LEDGER.md's table of rounds per client under rdp, pld and rdp_filter (about a minute)
$(BUILD)/tests/schedule_table: $(BUILD)/tests/tables/schedule_table.o $(LIBCORE)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_CORE)

schedule-table: deps-build
	$(Q)$(MAKE) --no-print-directory $(BUILD)/tests/schedule_table
	$(Q)./$(BUILD)/tests/schedule_table

sanitize: deps
	$(Q)$(MAKE) --no-print-directory BUILD=build-san \
	    CFLAGS="-O1 -g -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	    build-san/tests/unit_tests build-san/tests/api_tests build-san/tests/persist_tests \
	    build-san/tests/pg_tests \
	    build-san/dpbudgetd build-san/tests/fuzz_regress_request build-san/tests/fuzz_regress_wal
	$(Q)ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 sh tests/run.sh build-san

bench: deps
	$(Q)sh scripts/deps.sh --bench
	$(Q)$(MAKE) --no-print-directory $(BENCH_BIN) $(DAEMON)
	$(Q)sh bench/run.sh $(BUILD)
	$(Q)./$(BUILD)/bench/bench_shuffle_exact
	$(Q)./$(BUILD)/bench/bench_ledger $(BUILD)
	$(Q)./$(BUILD)/bench/bench_vocab $(BUILD)
	$(Q)./$(BUILD)/bench/bench_tlog
	$(Q)./$(BUILD)/bench/bench_pld_ledger $(BUILD)
	$(Q)sh bench/pld_sweep.sh $(BUILD)
	$(Q)python3 bench/bench_sdk.py $(DAEMON)
	$(Q)python3 bench/bench_receipts.py $(DAEMON)
	$(Q)python3 bench/bench_hostile.py $(DAEMON)
	$(Q)clients/python/.venv/bin/python bench/bench_flower.py $(DAEMON)
	$(Q)sh bench/replicas.sh $(BUILD)

# The PLD regime sweep with every scenario timed against dp_accounting (DP_ACCOUNTING_PATH).
bench-pld-full: deps
	$(Q)$(MAKE) --no-print-directory $(BUILD)/bench/bench_pld_sweep
	$(Q)PLD_SWEEP_COMPARE=all PLD_SWEEP_SECONDS=3600 sh bench/pld_sweep.sh $(BUILD)

# The ledger benchmark at the issue's full size: 1e6 clients with 100 rounds each (slow).
bench-ledger-full: deps
	$(Q)$(MAKE) --no-print-directory $(BUILD)/bench/bench_ledger
	$(Q)BENCH_LEDGER_ROUNDS=100 ./$(BUILD)/bench/bench_ledger $(BUILD)

# calls run downward (server -> core/ledger -> core/dp -> core/common, and by layer inside a
# folder), no circle of files, no HTTP/JSON in core/, libpq in store_pg.c alone: read from the
# objects' symbols (scripts/check_layers.py)
check-layers: $(CORE_OBJ) $(SERVER_OBJ) $(BUILD)/server/main.o
	$(Q)python3 scripts/check_layers.py $(BUILD)

FORMAT_SRC = $(filter-out tests/unit/ref_%.h core/dp/erfcx_table.h,$(wildcard core/*/*.[ch] server/*.[ch] tests/*/*.[ch] bench/*.[ch]))
format:
	clang-format -i $(FORMAT_SRC)
format-check:
	$(Q)clang-format --dry-run --Werror $(FORMAT_SRC) && echo "format-check: clean"

install: $(DAEMON)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/dpbudget
	install -m 0755 $(DAEMON) $(DESTDIR)$(PREFIX)/bin/dpbudgetd
	install -m 0644 openapi.yaml $(DESTDIR)$(PREFIX)/share/dpbudget/openapi.yaml
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/dpbudgetd $(DESTDIR)$(PREFIX)/share/dpbudget/openapi.yaml

clean:
	rm -rf build build-san

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# libFuzzer targets (make fuzz) and their replay in the test suite (tests/fuzz/)
include mk/fuzz.mk
