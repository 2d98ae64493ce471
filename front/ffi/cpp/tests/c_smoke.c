/* The header is plain C: a C11 program links the static library, checks
 * the version and the error path without a daemon. */
#include <stdio.h>
#include <string.h>

#include "tagwire.h"

int main(void) {
  tw_client_options o = tw_client_options_default();
  tw_client* c = NULL;
  tw_status s;
  o.socket = "/nonexistent/tagwire.sock";
  o.autostart = false;
  s = tw_client_connect_with(&o, &c);
  if (s != TW_ERR_DAEMON_UNREACHABLE || c != NULL) {
    fprintf(stderr, "expected ERR_DAEMON_UNREACHABLE, got %s\n", tw_status_name(s));
    return 1;
  }
  if (strstr(tw_last_error(), "tagwire daemon") == NULL) {
    fprintf(stderr, "unexpected message: %s\n", tw_last_error());
    return 1;
  }
  printf("tagwire %s from C: %s\n", tw_version(), tw_status_name(s));
  return 0;
}
