package dev.tagwire;

import java.time.Instant;

/**
 * A sender or receiver of a tag.
 *
 * @param who   the process and its node
 * @param since when it joined
 */
public record Member(Sender who, Instant since) {}
