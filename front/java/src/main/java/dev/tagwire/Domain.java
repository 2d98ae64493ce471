package dev.tagwire;

/** Where a tag is visible: on every node, or only on this one. */
public enum Domain {
    /** Visible on all nodes ({@code TW_DOMAIN_GLOBAL}). */
    GLOBAL(0),
    /** Visible only on this node ({@code TW_DOMAIN_LOCAL}). */
    LOCAL(1);

    final int code;

    Domain(int code) {
        this.code = code;
    }

    static Domain of(int code) {
        return code == 1 ? LOCAL : GLOBAL;
    }
}
