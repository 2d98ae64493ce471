package dev.tagwire;

import java.util.List;

/**
 * A tag of the node's tag table.
 *
 * @param name      the tag's name
 * @param domain    global or local
 * @param senders   the processes holding send access
 * @param receivers the processes subscribed
 */
public record TagInfo(String name, Domain domain, List<Member> senders, List<Member> receivers) {}
