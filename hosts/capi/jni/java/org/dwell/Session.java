package org.dwell;

/**
 * One conversation. Used by one thread at a time, except {@link #cancel}, which any thread may
 * call while the session is open.
 */
public final class Session implements AutoCloseable {
    private volatile long handle;

    Session(long handle) {
        this.handle = handle;
    }

    /**
     * Continues the conversation with {@code text} and streams the reply to {@code callback}.
     *
     * @param maxTokens tokens to generate at most
     * @param temperature 0 for greedy
     * @throws DwellException with code {@link DwellException#CANCELLED} after {@link #cancel}
     */
    public GenerationStats generate(String text, int maxTokens, float temperature, long seed,
            TokenCallback callback) {
        return nativeGenerate(checkOpen(), text, maxTokens, temperature, seed, callback);
    }

    /** Stops the running (or the next) generation; safe from any thread. */
    public void cancel() {
        long h = handle;
        if (h != 0) nativeCancel(h);
    }

    private long checkOpen() {
        long h = handle;
        if (h == 0) throw new IllegalStateException("the session is closed");
        return h;
    }

    @Override
    public synchronized void close() {
        long h = handle;
        if (h != 0) {
            handle = 0;
            nativeFree(h);
        }
    }

    static native long nativeCreate(long model, int contextLength);

    private static native void nativeFree(long handle);

    private static native GenerationStats nativeGenerate(long handle, String text, int maxTokens,
            float temperature, long seed, TokenCallback callback);

    private static native void nativeCancel(long handle);
}
