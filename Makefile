# Joader — top-level entry points. `make demo` and `make test` work on a fresh Debian 12 machine:
# they install what is missing (Debian packages only), build, then run.
JOBS ?= 2
BUILD ?= build
CMAKE_FLAGS ?=

# Debian packages the build and tests need.
PACKAGES := build-essential cmake pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev \
            libgtest-dev libgmock-dev libbenchmark-dev python3 \
            libturbojpeg0-dev libpng-dev liblmdb-dev \
            libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc \
            pybind11-dev python3-dev python3-pytest python3-numpy python3-torch python3-torchvision \
            python3-matplotlib

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build test demo bench test-asan test-tsan clean

deps:
	@missing=$$(for p in $(PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "Installing missing packages:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends $$missing; \
	fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

demo: build
	$(BUILD)/joader demo

bench: build
	$(BUILD)/sampler_bench --benchmark_min_time=1
	/usr/bin/python3 bench/ld_table.py --joader $(BUILD)/joader
	JOADER_BUILD=$(BUILD) /usr/bin/python3 bench/daemon_bench.py
	/usr/bin/python3 bench/e2e/run.py --build $(BUILD) --out docs
	$(BUILD)/prep_bench --benchmark_min_time=1 $(BUILD)/e2e-data

# Sanitizer builds live in their own folders; the tests are the same.
test-asan:
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DJOADER_SANITIZE=address -DJOADER_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug"

test-tsan:
	TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp second_deadlock_stack=1" \
	$(MAKE) test BUILD=build-tsan CMAKE_FLAGS="-DJOADER_SANITIZE=thread -DJOADER_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug"

clean:
	rm -rf build build-asan build-tsan
