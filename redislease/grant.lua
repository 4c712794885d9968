-- grant.lua: the grant of a free key, spliced by scripts.go into acquire.lua
-- (a free key) and release.lua (a hand-off to the first waiter) where they
-- say "--@grant"; not a script of its own. It expects these locals:
--
--   t          the server clock (TIME's reply)
--   fenceKey   the key's fence counter
--   grantee    the token that gets the key, holder its holder name
--   grantTTL   its TTL in whole milliseconds, as a string (a Lua number
--              would be formatted)
--
-- and leaves the new fence in the local fence. The fence is larger than the
-- last one granted for this key (the counter) and at least the server's
-- clock in microseconds, so it keeps growing even when the counter was lost
-- (a restart without persistence, a failover). Fences are decimal strings
-- without leading zeros: the clock's (TIME's seconds, then its microseconds
-- padded to six digits) is compared with the counter by length, then as
-- text, so that the common case formats no number (string.format costs
-- about as much as a server call). The counter is swapped for the clock's
-- fence in one call (GETSET: the common case, the clock ahead of the
-- counter) and set again only when the counter was ahead.
--
-- The lease is one string, token NUL fence NUL holder, with the TTL: one
-- SET with PX, where a hash took HSET and PEXPIRE (docs/stores.md gives the
-- measured saving). Tokens never contain NUL (the Store rejects them),
-- so the token is everything before the first NUL byte; the fence is
-- digits; the holder is the rest, whatever its bytes.
local fence = t[1] .. string.sub('00000' .. t[2], -6)
local last = redis.call('GETSET', fenceKey, fence)
if last and (#last > #fence or (#last == #fence and last >= fence)) then
  local n = tonumber(last)
  if n then
    fence = string.format('%.0f', n + 1)
    redis.call('SET', fenceKey, fence)
  end
end
redis.call('SET', KEYS[1], grantee .. '\0' .. fence .. '\0' .. holder, 'PX', grantTTL)
