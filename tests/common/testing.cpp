// Shared test utilities (see tests/common/*.h).
