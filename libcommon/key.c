/* Ed25519 signing with OpenSSL: raw 32-byte keys, 64-byte signatures. */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <string.h>
#include "libcommon/common.h"

/* Before any other libcrypto call: the system's openssl.cnf is not ours to follow
 * (it may load providers or change defaults), and parsing it costs every tool ~1 ms. */
__attribute__((constructor)) static void key_crypto_init(void)
{
	OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
}

int common_key_generate(struct common_key *k, struct common_err *e)
{
	EVP_PKEY *pk;
	size_t n = 32;

	if (RAND_bytes(k->priv, 32) != 1)
		return common_errf(e, "authority key", "no randomness available");
	pk = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, k->priv, 32);
	if (!pk || EVP_PKEY_get_raw_public_key(pk, k->pub, &n) != 1 || n != 32) {
		EVP_PKEY_free(pk);
		return common_errf(e, "authority key", "Ed25519 key generation failed");
	}
	EVP_PKEY_free(pk);
	k->has_priv = 1;
	return 0;
}

/* Keys made once per process: an EVP_PKEY built from raw bytes derives the public
 * point (as costly as a signature) and looks up the provider's methods each time. */
#define KEY_CACHE 4
static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uint8_t raw[32];
	int priv;
	EVP_PKEY *pk;
} key_cache[KEY_CACHE];
static unsigned key_next;

/* The key for raw (a private or a public key), with key_lock held; NULL when the
 * bytes make none. */
static EVP_PKEY *key_cached(const uint8_t raw[32], int priv)
{
	EVP_PKEY *pk;
	unsigned i;

	for (i = 0; i < KEY_CACHE; i++)
		if (key_cache[i].pk && key_cache[i].priv == priv && memcmp(key_cache[i].raw, raw, 32) == 0)
			return key_cache[i].pk;
	pk = priv ? EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, raw, 32)
		  : EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, 32);
	if (!pk)
		return NULL;
	i = key_next++ % KEY_CACHE;
	EVP_PKEY_free(key_cache[i].pk);
	memcpy(key_cache[i].raw, raw, 32);
	key_cache[i].priv = priv;
	key_cache[i].pk = pk;
	return pk;
}

int common_key_derive(struct common_key *k)
{
	EVP_PKEY *pk;
	size_t n = 32;
	int ok;

	pthread_mutex_lock(&key_lock);
	pk = key_cached(k->priv, 1); /* the key that will sign */
	ok = pk && EVP_PKEY_get_raw_public_key(pk, k->pub, &n) == 1 && n == 32;
	pthread_mutex_unlock(&key_lock);
	k->has_priv = ok;
	return ok ? 0 : -1;
}

int common_key_sign(const struct common_key *k, const void *msg, size_t len,
		    uint8_t sig[64], struct common_err *e)
{
	EVP_PKEY *pk;
	EVP_MD_CTX *ctx;
	size_t n = 64;
	int ok;

	if (!k->has_priv)
		return common_errf(e, "sign", "no private authority key");
	ctx = EVP_MD_CTX_new();
	pthread_mutex_lock(&key_lock);
	pk = key_cached(k->priv, 1);
	ok = pk && ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, pk) == 1 &&
	     EVP_DigestSign(ctx, sig, &n, msg, len) == 1 && n == 64;
	pthread_mutex_unlock(&key_lock);
	EVP_MD_CTX_free(ctx);
	return ok ? 0 : common_errf(e, "sign", "Ed25519 signing failed");
}

int common_key_verify(const uint8_t pub[32], const void *msg, size_t len, const uint8_t sig[64])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	EVP_PKEY *pk;
	int ok;

	pthread_mutex_lock(&key_lock);
	pk = key_cached(pub, 0);
	ok = pk && ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pk) == 1 &&
	     EVP_DigestVerify(ctx, sig, 64, msg, len) == 1;
	pthread_mutex_unlock(&key_lock);
	EVP_MD_CTX_free(ctx);
	return ok;
}
