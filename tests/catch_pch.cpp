// Nothing of its own: the target that owns the precompiled <catch2/catch.hpp> the test binaries
// reuse (tests/CMakeLists.txt says why it is a target of its own).
