package org.dwell;

import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * One conversation. Used by one thread at a time, except {@link #cancel}, which any thread may
 * call at any time, and {@link #close}, which any thread may call: it cancels a running
 * generation and waits for it to end before freeing the session.
 */
public final class Session implements AutoCloseable {
    private long handle;
    // generate and cancel hold the read side; close takes the write side, so
    // the native session is never freed while a call uses it.
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();

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
        lock.readLock().lock();
        try {
            if (handle == 0) throw new IllegalStateException("the session is closed");
            return nativeGenerate(handle, text, maxTokens, temperature, seed, callback);
        } finally {
            lock.readLock().unlock();
        }
    }

    /** Stops the running (or the next) generation; safe from any thread. */
    public void cancel() {
        lock.readLock().lock();
        try {
            if (handle != 0) nativeCancel(handle);
        } finally {
            lock.readLock().unlock();
        }
    }

    @Override
    public void close() {
        // Stop a running reply first, so the write lock does not wait for all of it.
        cancel();
        lock.writeLock().lock();
        try {
            if (handle != 0) {
                nativeFree(handle);
                handle = 0;
            }
        } finally {
            lock.writeLock().unlock();
        }
    }

    static native long nativeCreate(long model, int contextLength);

    private static native void nativeFree(long handle);

    private static native GenerationStats nativeGenerate(long handle, String text, int maxTokens,
            float temperature, long seed, TokenCallback callback);

    private static native void nativeCancel(long handle);
}
