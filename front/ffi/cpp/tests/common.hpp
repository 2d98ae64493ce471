// Shared by the test files: one daemon per test program, unique tag names.
#pragma once

#include <atomic>
#include <string>

#include "daemon.hpp"
#include "tagwire.hpp"

inline TestDaemon& daemon_for_tests() {
  static TestDaemon d;
  return d;
}

inline tagwire::ClientOptions test_options() {
  tagwire::ClientOptions o;
  o.socket = daemon_for_tests().socket();
  o.autostart = false;
  o.timeout = std::chrono::milliseconds(3000);
  return o;
}

inline std::string unique_tag(const std::string& what) {
  static std::atomic<int> n{0};
  return "/cpp-test/" + std::to_string(getpid()) + "/" + what + "/" + std::to_string(n++);
}
