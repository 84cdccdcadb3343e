// Registers the throwaway compiler extension (ThrowawayExtension.cpp).
#ifndef HC_TEST_EXTENSION_THROWAWAYEXTENSION_H
#define HC_TEST_EXTENSION_THROWAWAYEXTENSION_H

namespace hc::throwaway {
void registerThrowawayExtension();
} // namespace hc::throwaway

#endif // HC_TEST_EXTENSION_THROWAWAYEXTENSION_H
