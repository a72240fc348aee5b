package org.dwell;

/**
 * Loads the native library: {@code libdwell_jni.so} from java.library.path (an Android app
 * packs it in its APK), or the file named by the system property {@code dwell.jni.library}.
 */
public final class Dwell {
    private static boolean loaded;

    private Dwell() {}

    static synchronized void ensureLoaded() {
        if (loaded) return;
        String path = System.getProperty("dwell.jni.library");
        if (path != null && !path.isEmpty()) {
            System.load(path);
        } else {
            System.loadLibrary("dwell_jni");
        }
        loaded = true;
    }

    /** (major << 16) | minor of the C API the library implements. */
    public static int version() {
        ensureLoaded();
        return nativeVersion();
    }

    private static native int nativeVersion();
}
