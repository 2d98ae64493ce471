// A tagwire daemon for one test program: `tagwire daemon --socket DIR/sock`
// in a fresh temporary directory, started and stopped by the tests.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "tagwire.h"

#ifndef TAGWIRE_CLI
#error "TAGWIRE_CLI (the tagwire binary) must be defined by the build"
#endif

class TestDaemon {
 public:
  TestDaemon() {
    char tmpl[] = "/tmp/tagwire-cpp-test-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (!d) throw std::runtime_error("mkdtemp failed");
    dir_ = d;
    socket_ = dir_ + "/tagwired.sock";
    start();
  }
  ~TestDaemon() {
    stop();
    std::string cmd = "rm -rf '" + dir_ + "'";
    (void)!system(cmd.c_str());
  }
  TestDaemon(const TestDaemon&) = delete;
  TestDaemon& operator=(const TestDaemon&) = delete;

  const std::string& socket() const { return socket_; }

  void start() {
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      std::string log = dir_ + "/tagwired.log";
      FILE* f = freopen(log.c_str(), "a", stderr);
      (void)f;
      execl(TAGWIRE_CLI, TAGWIRE_CLI, "daemon", "--socket", socket_.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Up when it answers a ping.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      tw_client_options o = tw_client_options_default();
      o.socket = socket_.c_str();
      o.autostart = false;
      tw_client* c = nullptr;
      if (tw_client_connect_with(&o, &c) == TW_OK) {
        tw_status s = tw_ping(c);
        tw_client_free(c);
        if (s == TW_OK) return;
      }
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("the test daemon did not come up");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  void stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int st = 0;
      waitpid(pid_, &st, 0);
      pid_ = -1;
    }
  }

  void restart() {
    stop();
    start();
  }

 private:
  std::string dir_, socket_;
  pid_t pid_ = -1;
};
