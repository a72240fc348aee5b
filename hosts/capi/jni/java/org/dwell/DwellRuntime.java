package org.dwell;

/**
 * The runtime: backends chosen by a device manifest (or by detecting the device), and the
 * memory budget. Thread-safe. Close it when done; models and sessions made from it keep what
 * they need alive until they are closed too.
 */
public final class DwellRuntime implements AutoCloseable {
    static {
        Dwell.ensureLoaded();
    }

    long handle;

    private DwellRuntime(long handle) {
        this.handle = handle;
    }

    /** @param manifestPath a manifest file, or null to detect the device and choose one */
    public static DwellRuntime open(String manifestPath, int threads) {
        return new DwellRuntime(nativeOpen(manifestPath, threads));
    }

    public static DwellRuntime open() {
        return open(null, 0);
    }

    public synchronized Model loadModel(String path) {
        return new Model(Model.nativeLoad(checkOpen(), path));
    }

    long checkOpen() {
        if (handle == 0) throw new IllegalStateException("the runtime is closed");
        return handle;
    }

    @Override
    public synchronized void close() {
        if (handle != 0) {
            nativeClose(handle);
            handle = 0;
        }
    }

    private static native long nativeOpen(String manifestPath, int threads);

    private static native void nativeClose(long handle);
}
