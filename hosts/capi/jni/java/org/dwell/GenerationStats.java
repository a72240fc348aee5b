package org.dwell;

/** What one {@link Session#generate} call did. */
public final class GenerationStats {
    public final int promptTokens;
    public final int generatedTokens;
    public final double promptTokensPerSecond;
    public final double generationTokensPerSecond;
    public final boolean stoppedAtEndOfText;

    GenerationStats(int promptTokens, int generatedTokens, double promptTokensPerSecond,
            double generationTokensPerSecond, boolean stoppedAtEndOfText) {
        this.promptTokens = promptTokens;
        this.generatedTokens = generatedTokens;
        this.promptTokensPerSecond = promptTokensPerSecond;
        this.generationTokensPerSecond = generationTokensPerSecond;
        this.stoppedAtEndOfText = stoppedAtEndOfText;
    }
}
