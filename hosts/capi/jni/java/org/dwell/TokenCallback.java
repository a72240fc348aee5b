package org.dwell;

/** Receives each generated token on the generating thread. */
@FunctionalInterface
public interface TokenCallback {
    /**
     * @param token the token id, or -1 for trailing text flushed at the end
     * @param text its text (may be empty while a character is incomplete)
     * @return false to stop generating
     */
    boolean onToken(int token, String text);
}
