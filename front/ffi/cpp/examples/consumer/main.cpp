// Built against the installed package: says hello through the node's daemon
// if one runs, and names the error it gets if none does.
#include <cstdio>

#include <tagwire.hpp>

int main() {
  try {
    tagwire::ClientOptions o;
    o.autostart = false;
    tagwire::Client c(o);
    c.create_tag("/consumer/hello", tagwire::Domain::local);
    auto sub = c.subscribe("/consumer/hello");
    c.publisher("/consumer/hello").send("hello");
    std::printf("consumer: %s from %s\n", std::string(sub.receive(std::chrono::seconds(1)).text()).c_str(),
                c.me().str().c_str());
  } catch (const tagwire::Error& e) {
    std::printf("consumer: linked tagwire %s; no daemon here (%s)\n", tw_version(), e.kind_name());
  }
  return 0;
}
