package org.dwell;

/**
 * A loaded model. Thread-safe; sessions made from it keep it alive, so it may be closed while
 * they are in use.
 */
public final class Model implements AutoCloseable {
    private long handle;

    Model(long handle) {
        this.handle = handle;
    }

    public synchronized Session newSession(int contextLength) {
        return new Session(Session.nativeCreate(checkOpen(), contextLength));
    }

    public Session newSession() {
        return newSession(0);
    }

    long checkOpen() {
        if (handle == 0) throw new IllegalStateException("the model is closed");
        return handle;
    }

    @Override
    public synchronized void close() {
        if (handle != 0) {
            nativeFree(handle);
            handle = 0;
        }
    }

    static native long nativeLoad(long runtime, String path);

    private static native void nativeFree(long handle);
}
