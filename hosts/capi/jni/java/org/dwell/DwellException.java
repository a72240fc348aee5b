package org.dwell;

/** A dwell call failed: {@link #code()} is the dwell_status, the message says what and why. */
public final class DwellException extends RuntimeException {
    public static final int INVALID_ARGUMENT = 1;
    public static final int UNSUPPORTED = 2;
    public static final int UNAVAILABLE = 3;
    public static final int OUT_OF_MEMORY = 5;
    public static final int IO = 6;
    public static final int CORRUPT = 7;
    public static final int CANCELLED = 8;
    public static final int TIMEOUT = 9;
    /** The session's context has no room for the text (C API 1.3). */
    public static final int CONTEXT_FULL = 256;

    private final int code;

    public DwellException(int code, String message) {
        super(message);
        this.code = code;
    }

    public int code() {
        return code;
    }
}
